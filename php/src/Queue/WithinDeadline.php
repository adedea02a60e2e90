<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Container\Container;
use Resilient\Deadline;

/**
 * Job middleware: one deadline for every Resilient call the job makes, ending before the worker's
 * own timeout would kill the job (seed 000: HTTP time in a job < the job's `$timeout` <
 * the connection's `retry_after`).
 *
 *     public function middleware(): array { return [new WithinDeadline()]; }    // $timeout − margin
 *     public function middleware(): array { return [new WithinDeadline(45)]; }  // 45 s
 *
 * Without an argument the deadline is the job's timeout (its `$timeout`, else the worker's
 * default `resilient.queue.worker_timeout`, 60 s as `queue:work`) minus a margin
 * (`resilient.queue.deadline_margin` seconds, else a tenth of the timeout, at least 1 s), so the
 * client throws DeadlineExceeded while the job can still record the outcome, instead of the
 * worker killing the process mid-write.
 */
final class WithinDeadline
{
    public function __construct(private ?float $seconds = null, private ?float $margin = null)
    {
    }

    /** @param object $job */
    public function handle($job, Closure $next)
    {
        return Deadline::within($this->secondsFor($job), fn () => $next($job));
    }

    public function secondsFor(object $job): float
    {
        if ($this->seconds !== null) {
            return $this->seconds;
        }
        $timeout = self::timeoutOf($job);
        $margin = $this->margin ?? self::config('resilient.queue.deadline_margin') ?? self::defaultMargin($timeout);
        $seconds = $timeout - (float) $margin;

        // A margin as long as the timeout would leave nothing: keep half rather than zero.
        return $seconds > 0 ? $seconds : $timeout / 2;
    }

    /** The default margin between a job's timeout and what happens before or after it: a tenth, at least 1 s. */
    public static function defaultMargin(float $timeout): float
    {
        return max(1.0, $timeout / 10);
    }

    /** The timeout the worker applies to this job (Worker::timeoutForJob: the job's first). */
    public static function timeoutOf(object $job): float
    {
        if (isset($job->timeout) && is_numeric($job->timeout) && $job->timeout > 0) {
            return (float) $job->timeout;
        }
        $queued = $job->job ?? null;
        if (is_object($queued) && method_exists($queued, 'timeout') && is_numeric($queued->timeout()) && $queued->timeout() > 0) {
            return (float) $queued->timeout();
        }

        return (float) (self::config('resilient.queue.worker_timeout') ?? 60);
    }

    private static function config(string $key): mixed
    {
        $app = Container::getInstance();

        return $app->bound('config') ? $app['config']->get($key) : null;
    }
}
