<?php

namespace Resilient\Laravel\Queue;

/**
 * Jittered `backoff()` for a queued job: each range gives a fresh whole number of seconds every
 * time Laravel asks (it asks once per dispatch), so jobs that failed together come back spread
 * out instead of all at once (seed 000's `[[240, 360], [540, 660]]`).
 *
 *     use JitteredBackoff;
 *     public $tries = 3;
 *     public array $backoffRanges = [[240, 360], [540, 660]];   // optional; these are the default
 *
 * A plain number in the list is kept as a fixed delay. `releaseDelay()` draws the range of the
 * current attempt for a job that calls `release()` itself (the seed's RETRY_DELAYS pattern).
 */
trait JitteredBackoff
{
    /** @return list<int> seconds before each retry */
    public function backoff(): array
    {
        $ranges = $this->backoffRanges();
        if ($ranges === []) {
            // Laravel would send it as '' and its worker retry at once, whatever its --backoff.
            throw new \InvalidArgumentException('resilient: $backoffRanges is empty: give ranges such as [[240, 360]], or drop JitteredBackoff for the worker\'s --backoff');
        }

        return array_map(fn ($range) => self::drawBackoff($range), $ranges);
    }

    /** A delay from the range of this attempt (the last range once past the end), or null without ranges. */
    public function releaseDelay(): ?int
    {
        $ranges = $this->backoffRanges();
        if ($ranges === []) {
            return null;
        }
        $attempt = method_exists($this, 'attempts') ? max(1, (int) $this->attempts()) : 1;

        return self::drawBackoff($ranges[min($attempt, count($ranges)) - 1]);
    }

    /** @return list<mixed> the ranges as given (each checked when drawn) */
    protected function backoffRanges(): array
    {
        if (! property_exists($this, 'backoffRanges')) {
            return [[240, 360], [540, 660]];
        }
        if (! is_array($this->backoffRanges)) {
            throw new \InvalidArgumentException(sprintf(
                'resilient: $backoffRanges must be a list of [min, max] ranges or seconds, got %s', get_debug_type($this->backoffRanges),
            ));
        }

        return array_values($this->backoffRanges);
    }

    /** The longest backoff taken: a year (a larger number would overflow into nonsense). */
    private const LONGEST = 31_536_000;

    private static function drawBackoff(mixed $range): int
    {
        if (! is_array($range)) {
            if (is_int($range) && $range >= 0 && $range <= self::LONGEST) {
                return $range;
            }
            throw new \InvalidArgumentException('resilient: a backoff must be [min, max] or whole seconds from 0 to '
                . self::LONGEST . ' (a year), got ' . (is_int($range) ? $range : get_debug_type($range)));
        }
        $ends = array_values($range);
        if (count($ends) !== 2 || ! QueueSettings::isSeconds($ends[0]) || ! QueueSettings::isSeconds($ends[1]) || $ends[1] < $ends[0]
            || $ends[1] > self::LONGEST) {
            throw new \InvalidArgumentException('resilient: a backoff range must be [min, max] with 0 <= min <= max <= '
                . self::LONGEST . ' (a year), got [' . implode(', ', array_map(QueueSettings::shown(...), $ends)) . ']');
        }
        [$min, $max] = $ends;

        return random_int((int) $min, (int) $max);
    }
}
