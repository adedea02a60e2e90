<?php

namespace Resilient\Laravel\Queue;

use Resilient\Unavailable;

/**
 * Reads the `Retry-After` of the last response an exception carries: delta-seconds or an
 * HTTP-date (RFC 9110 §10.2.3), as the client itself obeys it.
 */
final class RetryAfter
{
    /** Seconds from now, or null when there is no response or no usable header. */
    public static function of(Unavailable $e, ?float $now = null): ?float
    {
        $response = $e->response();
        if ($response === null) {
            return null;
        }
        $value = $response->header('Retry-After');

        return is_string($value) ? self::parse($value, $now ?? microtime(true)) : null;
    }

    public static function parse(string $value, float $now): ?float
    {
        $value = trim($value);
        if ($value === '') {
            return null;
        }
        if (ctype_digit($value)) {
            return (float) $value;
        }
        $date = \DateTimeImmutable::createFromFormat('D, d M Y H:i:s \G\M\T', $value, new \DateTimeZone('UTC'));
        if ($date === false) {
            return null;
        }

        return max(0.0, (float) $date->getTimestamp() - $now);
    }
}
