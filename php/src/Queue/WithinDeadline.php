<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Container\Container;
use InvalidArgumentException;
use Resilient\Deadline;
use Resilient\Laravel\ExtensionCheck;

/**
 * Job middleware: one deadline for every Resilient call the job makes, ending before the worker's
 * own timeout would kill the job (seed 000: HTTP time in a job < the job's `$timeout` <
 * the connection's `retry_after`).
 *
 *     public function middleware(): array { return [new WithinDeadline()]; }    // $timeout − margin
 *     public function middleware(): array { return [new WithinDeadline(45)]; }  // 45 s
 *
 * Without an argument the deadline is the job's timeout (its `$timeout`, else the worker's
 * default `resilient.queue.worker_timeout`, 60 s as `queue:work`; the worker's alarm when it
 * rings sooner, as `queue:work --timeout=7` arms it) minus a margin
 * (`resilient.queue.deadline_margin` seconds, else a tenth of the timeout, at least 1 s), so the
 * client throws DeadlineExceeded while the job can still record the outcome, instead of the
 * worker killing the process mid-write. A margin or worker timeout that is not a finite number
 * >= 0 is refused (InvalidArgumentException naming it, see QueueSettings): a negative margin
 * would put the deadline past the job's timeout. A deadline is at most a year (MAX_SECONDS, the
 * longest Deadline::within takes): a job with a longer timeout gets a year.
 *
 * A job without a timeout (`$timeout = 0`, or a worker timeout of 0: the worker never kills it)
 * gets no deadline from it: without an argument its calls run under their clients' own
 * deadlines only; give the seconds (`new WithinDeadline(600)`) to bound the job's calls.
 */
final class WithinDeadline
{
    /** The longest deadline (Deadline::within's bound): a year. */
    public const MAX_SECONDS = 31536000.0;

    public function __construct(private ?float $seconds = null, private ?float $margin = null)
    {
        // 0 or less would refuse every call of the job at once; as the route middleware refuses it.
        if ($seconds !== null && ! (is_finite($seconds) && $seconds > 0 && $seconds <= self::MAX_SECONDS)) {
            throw new \InvalidArgumentException(sprintf(
                'Queue\\WithinDeadline: seconds must be a finite number above 0 and at most %d (a year), got %s',
                self::MAX_SECONDS,
                $seconds,
            ));
        }
        if ($margin !== null) {
            self::checkedMargin($margin, 'Queue\\WithinDeadline: margin');
        }
    }

    /** @param object $job */
    public function handle($job, Closure $next)
    {
        ExtensionCheck::assertFits();
        $seconds = $this->secondsFor($job);

        return $seconds === null ? $next($job) : Deadline::within($seconds, fn () => $next($job));
    }

    /** The job's deadline in seconds, or null for none (no seconds given, a job without a timeout). */
    public function secondsFor(object $job): ?float
    {
        if ($this->seconds !== null) {
            return $this->seconds;
        }
        $timeout = self::timeoutOf($job);
        // The worker's alarm is what kills the job: a `queue:work --timeout` shorter than the
        // configured worker timeout (which the job cannot see) ends it sooner.
        $alarm = self::alarmLeft();
        if ($alarm > 0) {
            $timeout = $timeout === null ? (float) $alarm : min($timeout, (float) $alarm);
        }
        if ($timeout === null) {
            return null;
        }
        // An empty setting (`RESILIENT_DEADLINE_MARGIN=`) is no setting, not 0.
        $margin = $this->margin
            ?? QueueSettings::deadlineMargin(self::config('resilient.queue.deadline_margin'))
            ?? self::defaultMargin($timeout);
        $seconds = $timeout - $margin;

        // A margin as long as the timeout would leave nothing: keep half rather than zero.
        return min($seconds > 0 ? $seconds : $timeout / 2, self::MAX_SECONDS);
    }

    /**
     * Seconds until this process's alarm (the one `queue:work` arms with the job's timeout), 0 when
     * none is armed. Reading it cancels it, so it is armed again (to the second, as alarm() counts).
     */
    public static function alarmLeft(): int
    {
        if (! function_exists('pcntl_alarm')) {
            return 0;
        }
        $left = pcntl_alarm(0);
        if ($left > 0) {
            pcntl_alarm($left);
        }

        return $left;
    }

    /** The default margin between a job's timeout and what happens before or after it: a tenth, at least 1 s. */
    public static function defaultMargin(float $timeout): float
    {
        return max(1.0, $timeout / 10);
    }

    /** $margin, unless it is negative or not finite: the deadline would then outlast the job's timeout. */
    private static function checkedMargin(float $margin, string $what): float
    {
        if (! is_finite($margin) || $margin < 0) {
            throw new InvalidArgumentException(sprintf(
                "resilient: %s must be a finite number of seconds >= 0 (the job's deadline is its timeout minus it; "
                . 'a negative margin would let the calls outlast the timeout), got %s',
                $what, QueueSettings::shown($margin),
            ));
        }

        return $margin;
    }

    /**
     * The timeout the worker applies to this job (Worker::timeoutForJob: the job's own when set,
     * else the worker's), or null when it has none: 0 means no timeout, as for `pcntl_alarm()`.
     */
    public static function timeoutOf(object $job): ?float
    {
        $queued = $job->job ?? null;
        // Read at every run, so a setting every run would refuse is refused even for a job
        // that has its own timeout.
        $timeout = QueueSettings::workerTimeout(self::config('resilient.queue.worker_timeout'));
        foreach ([
            $job->timeout ?? null,
            is_object($queued) && method_exists($queued, 'timeout') ? $queued->timeout() : null,
        ] as $own) {
            if (is_numeric($own)) {
                $timeout = (float) $own;
                break;
            }
        }

        return $timeout > 0 ? $timeout : null;
    }

    private static function config(string $key): mixed
    {
        $app = Container::getInstance();

        return $app->bound('config') ? $app['config']->get($key) : null;
    }
}
