<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Container\Container;
use Resilient\Funnel as SharedFunnel;
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
 * it never blocks. The lease is held while the job runs and given back after it, also when the
 * job throws; if the worker is killed, the lease expires (`lease` seconds) and the slot returns.
 *
 * Workers are background callers: they may use `limit - reserve` slots, the rest stay for web
 * requests. With `share: true` (or `'share' => true` in the config) they also keep those slots
 * while web requests want more, as long as refusals keep coming: each one holds web callers to
 * the reserve for 100 ms, which a backlog of jobs renews and a lone released job does not
 * (README, "Sharing the slots under contention").
 */
final class Funnel
{
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
        $lease = $this->funnel()->tryAcquire();
        if ($lease === null) {
            Released::job($job, $this->delay->draw());

            return null;
        }
        try {
            return $next($job);
        } finally {
            $lease->release();
        }
    }

    private function funnel(): SharedFunnel
    {
        if ($this->limit !== null) {
            return new SharedFunnel($this->name, $this->limit, $this->reserve, $this->lease, $this->share);
        }

        return Container::getInstance()->make(ResilientManager::class)->funnel($this->name);
    }
}
