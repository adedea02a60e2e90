<?php

namespace Resilient\Laravel\Queue;

use Illuminate\Container\Container;
use InvalidArgumentException;

/**
 * How long a released job waits before a worker takes it again: a whole number of seconds drawn
 * uniformly from [min, max], so jobs refused together do not come back together (seed 000: a
 * fixed delay brings the whole batch back at the same second).
 *
 * The range comes from the constructor, else `resilient.queue.release_delay` ([min, max]; a
 * null end is the default's), else [5, 30]. An end over 11 hours (MAX_RETRY_AFTER) is taken as
 * 11 hours.
 */
final class ReleaseDelay
{
    public const DEFAULT = [5, 30];

    /**
     * The longest wait a `Retry-After` releases a job for: 11 hours. Amazon SQS's release
     * (ChangeMessageVisibility) accepts at most 12 hours counted from when the worker received
     * the job, and refuses more (the job then came back after the queue's visibility timeout,
     * an exception counted against it); the hour left is for the job's run before its release.
     * The client itself fails at once on a
     * Retry-After above its `max_retry_after` rather than sleep, but a released job costs a
     * worker nothing while it waits, so it waits, up to a bound every queue takes. A job told
     * to wait longer (a number past PHP's integers, a date years ahead) comes back within the
     * bound's last tenth, spread, and is released again.
     */
    public const MAX_RETRY_AFTER = 39600;

    private function __construct(public readonly int $min, public readonly int $max)
    {
    }

    /**
     * [min, max] seconds, 0 <= min <= max; each end over MAX_RETRY_AFTER is taken as it (a job
     * released for longer throws on SQS, and comes back no sooner than 11 h on any queue).
     */
    public static function between(int $min, int $max): self
    {
        if ($min < 0 || $max < $min) {
            throw new InvalidArgumentException("resilient: release delay must be 0 <= min <= max seconds, got [$min, $max]");
        }

        return new self(min($min, self::MAX_RETRY_AFTER), min($max, self::MAX_RETRY_AFTER));
    }

    /** The configured range (`resilient.queue.release_delay`), or [5, 30]. */
    public static function configured(): self
    {
        $range = self::DEFAULT;
        $app = Container::getInstance();
        if ($app->bound('config')) {
            $range = $app['config']->get('resilient.queue.release_delay', self::DEFAULT);
        }
        if (! is_array($range) || count($range) !== 2) {
            throw new InvalidArgumentException('resilient: resilient.queue.release_delay must be [min, max] in seconds');
        }
        // A null or '' (an unset or empty `env()`) is "not set": that end of the default range.
        [$min, $max] = array_map(fn ($v) => $v === '' ? null : $v, array_values($range));
        // Checked before any cast: (int) makes NAN and INF 0, and a float past PHP's integers
        // anything. Past MAX_RETRY_AFTER an end is taken as it (between()).
        $seconds = QueueSettings::isSeconds(...);
        $whole = fn ($v) => (int) min((float) $v, self::MAX_RETRY_AFTER);
        if (($min !== null && ! $seconds($min)) || ($max !== null && ! $seconds($max))
            || ($min !== null && $max !== null && (float) $min > (float) $max)) {
            throw new InvalidArgumentException(sprintf(
                'resilient: resilient.queue.release_delay must be [min, max] with 0 <= min <= max seconds, got [%s, %s]',
                QueueSettings::shown($min), QueueSettings::shown($max),
            ));
        }
        $min = $min === null ? ($max === null ? self::DEFAULT[0] : min(self::DEFAULT[0], $whole($max))) : $whole($min);
        $max = $max === null ? max(self::DEFAULT[1], $min) : $whole($max);

        return self::between($min, $max);
    }

    /** A delay in [min, max] seconds. */
    public function draw(): int
    {
        return random_int($this->min, $this->max);
    }

    /**
     * At least what the upstream asked for (never shortened up to MAX_RETRY_AFTER, as the client
     * itself never shortens a Retry-After), plus up to a tenth more (at least 1 s) so the jobs
     * told the same moment spread out, never past MAX_RETRY_AFTER; a longer wait is drawn from
     * the bound's last tenth.
     */
    public static function afterRetryAfter(float $seconds): int
    {
        // A NAN is no wait, an INF the bound.
        if ($seconds > self::MAX_RETRY_AFTER) {
            return random_int(self::MAX_RETRY_AFTER - intdiv(self::MAX_RETRY_AFTER, 10), self::MAX_RETRY_AFTER);
        }
        $base = $seconds > 0 ? (int) ceil($seconds) : 0;

        return min(self::MAX_RETRY_AFTER, $base + random_int(0, max(1, intdiv($base, 10))));
    }

    /**
     * The job's own backoff for its current attempt, as Laravel reads it when it dispatches the
     * job (`Queue::getJobBackoff`) and its worker when the job fails: the `backoff` property,
     * else `backoff()`; an int, a date (the seconds until it), a list of those (indexed by the
     * attempt, its last entry after its end) or a comma-separated string. 0 without one (the
     * worker's `--backoff` is not known to a job).
     *
     * @param object $job a queued job
     */
    public static function jobBackoff(object $job): int
    {
        $backoff = isset($job->backoff) ? $job->backoff : (method_exists($job, 'backoff') ? $job->backoff() : null);
        $entries = array_map(
            fn ($entry) => $entry instanceof \DateTimeInterface ? max(0, $entry->getTimestamp() - time()) : $entry,
            $backoff === null ? [] : (is_array($backoff) ? array_values($backoff) : [$backoff]),
        );
        $list = explode(',', implode(',', $entries));
        $attempt = method_exists($job, 'attempts') ? max(1, (int) $job->attempts()) : 1;

        return max(0, (int) ($list[$attempt - 1] ?? end($list)));
    }
}
