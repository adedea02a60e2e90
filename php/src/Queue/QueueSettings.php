<?php

namespace Resilient\Laravel\Queue;

use InvalidArgumentException;
use Resilient\Laravel\GivenText;

/**
 * The `resilient.queue` seconds the job middleware reads at every run, checked by one rule
 * wherever they are read (WithinDeadline, Queue\Funnel, `resilient:check`): a value the
 * middleware would refuse at every run is never one the check passes. An unset or empty value
 * (`env('X')` with X unset or empty) is no setting; anything but a finite number >= 0 is
 * refused, naming the setting and the value (a string that is no number only up to its first
 * character no word has: a Redis URL pasted there shows as `'redis…'`).
 */
final class QueueSettings
{
    /** `queue:work --timeout`'s default. */
    public const DEFAULT_WORKER_TIMEOUT = 60.0;

    /** `resilient.queue.worker_timeout`: the seconds of `queue:work --timeout` (0: none), else 60. */
    public static function workerTimeout(#[\SensitiveParameter] mixed $value): float
    {
        return self::seconds(
            $value,
            'resilient.queue.worker_timeout',
            'the seconds of `queue:work --timeout` (a finite number >= 0, 0 for none)',
        ) ?? self::DEFAULT_WORKER_TIMEOUT;
    }

    /** `resilient.queue.deadline_margin`: seconds >= 0, or null when it is not set. */
    public static function deadlineMargin(#[\SensitiveParameter] mixed $value): ?float
    {
        return self::seconds(
            $value,
            'resilient.queue.deadline_margin',
            "a finite number of seconds >= 0 (the job's deadline is its timeout minus it; a negative "
            . 'margin would let the calls outlast the timeout)',
        );
    }

    /** Whether $value is seconds as every queue setting takes them: a finite number >= 0. */
    public static function isSeconds(mixed $value): bool
    {
        return is_numeric($value) && is_finite((float) $value) && (float) $value >= 0;
    }

    /**
     * $value as a message may show it: a numeric string quoted as written, another string
     * quoted up to its first character no word has (GivenText::shown()), a number as PHP
     * exports it (INF, NAN), else its type.
     */
    public static function shown(#[\SensitiveParameter] mixed $value): string
    {
        return match (true) {
            is_string($value) => "'" . (is_numeric($value) ? $value : GivenText::shown($value)) . "'",
            is_int($value), is_float($value) => var_export($value, true),
            default => get_debug_type($value),
        };
    }

    private static function seconds(#[\SensitiveParameter] mixed $value, string $key, string $what): ?float
    {
        if ($value === null || $value === '') {
            return null;
        }
        if (self::isSeconds($value)) {
            return (float) $value;
        }
        throw new InvalidArgumentException(sprintf('%s: must be %s, got %s', $key, $what, self::shown($value)));
    }
}
