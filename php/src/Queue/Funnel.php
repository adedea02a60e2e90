<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Container\Container;
use Resilient\Funnel as SharedFunnel;
use Resilient\FunnelFull;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Laravel\ResilientManager;

/**
 * Job middleware: at most `limit` of these jobs run at once across every worker of the host.
 *
 *     public function middleware(): array { return [new Funnel('sap')]; }     // config funnels.sap
 *     public function middleware(): array { return [new Funnel('sap', limit: 3)]; }
 *
 * The shared-memory form of Laravel's documented `Redis::funnel('sap')->limit(3)->then(...)`
 * job recipe, without Redis and without polling: when the funnel is full the job is released
 * with a delay from the configured range (see ReleaseDelay) and the worker moves on at once;
 * it never blocks. Where nothing can take the job back (the `sync` queue, a job run by hand) it
 * throws FunnelFull instead: the job did not run. The lease is held while the job runs and given
 * back after it, also when the job throws. Under a worker that arms its alarm for the job
 * (`queue:work` with pcntl) it lasts at least the job's timeout (or the alarm, when that rings
 * later) plus a tenth (at least 1 s), whatever the funnel's `lease`: a lease that ended first
 * would let another worker in while the job still runs. Where no alarm ends the job at its
 * timeout (`queue:work --once`, `queue:listen`, PHP without pcntl), and for a job without a
 * timeout (`$timeout = 0`), the job holds its slot for up to a day, or the funnel's `lease` when
 * longer (at most a year). A worker killed at its timeout gives the slot back at once (its
 * process is gone); the lease only bounds a worker that is stuck.
 *
 * One funnel per name on the host: a job holding a slot of `shipping` that calls the client
 * `shipping` (whose own funnel has that name) needs a second slot of it, and at saturation none is
 * left for the call. Give such jobs a funnel of their own (`funnels.shipping-jobs`).
 *
 * Workers are background callers: they may use `limit - reserve` slots, the rest stay for web
 * requests. With `share: true` (or `'share' => true` in the config) they also keep those slots
 * while web requests want more, as long as refusals keep coming: each one holds web callers to
 * the reserve for 100 ms, which a backlog of jobs renews and a lone released job does not
 * (README, "Sharing the slots under contention").
 */
final class Funnel
{
    /** The lease of a job no alarm ends (see the class doc): a day. */
    private const NO_TIMEOUT_LEASE = 86400.0;

    /** The longest lease a Funnel takes: a year (a job's `$timeout` of 1e9 or INF gets it). */
    private const MAX_LEASE = 31536000.0;

    private ReleaseDelay $delay;

    public function __construct(
        private string $name,
        private ?int $limit = null,
        private int $reserve = 0,
        private ?float $lease = null,
        ?int $minDelay = null,
        ?int $maxDelay = null,
        private bool $share = false,
    ) {
        $this->delay = $minDelay === null && $maxDelay === null
            ? ReleaseDelay::configured()
            : ReleaseDelay::between($minDelay ?? 0, $maxDelay ?? $minDelay ?? 0);
    }

    /** @param object $job a queued job using InteractsWithQueue */
    public function handle($job, Closure $next)
    {
        ExtensionCheck::assertFits();
        $funnel = $this->funnel($job);
        $lease = $funnel->tryAcquire();
        if ($lease === null) {
            Released::job($job, $this->delay->draw(), fn () => new FunnelFull(sprintf(
                "funnel '%s' is full (%d of %d slots in flight) and the job cannot be released: "
                . 'it runs on the sync queue, or without a queue job, where a release puts it nowhere',
                $this->name, $funnel->inFlight(), $funnel->limit(),
            )));

            return null;
        }
        try {
            return $next($job);
        } finally {
            $lease->release();
        }
    }

    /** The funnel, with a lease that outlasts `$job`'s timeout (see the class doc). */
    private function funnel(object $job): SharedFunnel
    {
        $key = sprintf("Queue\\Funnel('%s')", $this->name);
        $funnel = $this->limit !== null
            ? ResilientManager::buildFunnel($key, $this->name, [$this->limit, $this->reserve, $this->lease, $this->share])
            : Container::getInstance()->make(ResilientManager::class)->funnel($this->name);
        // The worker's alarm, not `$timeout`, is what ends the job: without one it runs to its end.
        $alarm = WithinDeadline::alarmLeft();
        $timeout = $alarm > 0 ? WithinDeadline::timeoutOf($job) : null;
        if ($timeout !== null) {
            $timeout = max($timeout, $alarm);
        }
        $lease = $timeout === null ? self::NO_TIMEOUT_LEASE : $timeout + WithinDeadline::defaultMargin($timeout);
        $lease = min($lease, self::MAX_LEASE);

        return $funnel->lease() >= $lease
            ? $funnel
            : new SharedFunnel($this->name, $funnel->limit(), $funnel->reserve(), $lease, $funnel->share());
    }
}
