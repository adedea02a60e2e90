<?php

namespace Resilient\Laravel\Queue;

use DateTimeImmutable;
use DateTimeZone;
use Resilient\Unavailable;

/**
 * Reads the `Retry-After` of the last response an exception carries as the client itself
 * obeys it (RFC 9110 §10.2.3): delta-seconds or an HTTP-date in any of its three forms
 * (IMF-fixdate, RFC 850, asctime), and, read leniently as the client reads them, the RFC 5322
 * (a numeric zone or UTC, names in any case) and RFC 3339 dates servers also send; of several
 * values, the longest wait.
 */
final class RetryAfter
{
    /** The HTTP-date forms, as createFromFormat() reads them (asctime's padded day made single-spaced first). */
    private const DATE_FORMATS = ['!D, d M Y H:i:s \G\M\T', '!l, d-M-y H:i:s \G\M\T', '!D M j H:i:s Y'];

    /** Seconds from now, or null when there is no response or no usable header. */
    public static function of(Unavailable $e, ?float $now = null): ?float
    {
        $response = $e->response();
        if ($response === null) {
            return null;
        }

        return self::longest($response->headers()['retry-after'] ?? [], $now ?? microtime(true));
    }

    /** The longest wait among the values (each header line one value), or null when none is usable. */
    public static function longest(array $values, float $now): ?float
    {
        $waits = array_filter(array_map(fn ($v) => is_string($v) ? self::parse($v, $now) : null, $values), 'is_float');

        return $waits === [] ? null : max($waits);
    }

    /** One value's wait in seconds from `$now`, or null when it is not a valid Retry-After. */
    public static function parse(string $value, float $now): ?float
    {
        $value = trim($value, " \t");
        if ($value === '') {
            return null;
        }
        if (ctype_digit($value)) {
            return (float) $value;
        }
        $text = preg_replace('/ {2,}/', ' ', $value);
        foreach (self::DATE_FORMATS as $format) {
            $date = self::valid(DateTimeImmutable::createFromFormat($format, $text, new DateTimeZone('UTC')));
            // Nor one that does not read back as written: PHP takes a weekday that is not the
            // date's as a jump to the next such day, and a doubled space in asctime's form,
            // which the client refuses (the other forms go to lenient(), below).
            if ($date !== null && in_array($value, self::written($date, $format), true)) {
                return max(0.0, (float) $date->getTimestamp() - $now);
            }
        }
        $date = self::lenient($text);

        return $date === null ? null : max(0.0, (float) $date->getTimestamp() - $now);
    }

    /** An RFC 3339 date, or an RFC 5322 one (day name optional; zone numeric, UT, GMT or UTC; any case). */
    private static function lenient(string $text): ?DateTimeImmutable
    {
        $upper = strtoupper($text);
        if (preg_match('/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/', $upper, $m) === 1) {
            $date = DateTimeImmutable::createFromFormat('!Y-m-d\TH:i:s' . ($m[1] !== '' ? '.u' : '') . 'P',
                str_ends_with($upper, 'Z') ? substr($upper, 0, -1) . '+00:00' : $upper);

            return self::valid($date);
        }
        if (preg_match('/^(?:([A-Z]{3}), )?(\d{1,2}) ([A-Z]{3}) (\d{4}) (\d\d:\d\d:\d\d) (UT|UTC|GMT|Z|[+-]\d{4})$/', $upper, $m) !== 1) {
            return null;
        }
        $zone = in_array($m[6], ['UT', 'UTC', 'GMT', 'Z'], true) ? '+0000' : $m[6];
        $date = DateTimeImmutable::createFromFormat('!j M Y H:i:s O', sprintf('%d %s %s %s %s', $m[2], ucfirst(strtolower($m[3])), $m[4], $m[5], $zone));
        $date = self::valid($date);
        // A day name that is not the date's is no date (PHP would jump to the next such day).
        if ($date !== null && $m[1] !== '' && $date->format('D') !== ucfirst(strtolower($m[1]))) {
            return null;
        }

        return $date;
    }

    /** `$date` unless PHP had to roll it over (the 32nd of a month) or could not read it. */
    private static function valid(DateTimeImmutable|false $date): ?DateTimeImmutable
    {
        $errors = DateTimeImmutable::getLastErrors();

        return $date !== false && ($errors === false || $errors['warning_count'] + $errors['error_count'] === 0) ? $date : null;
    }

    /** How an HTTP-date of `$format` writes `$date`: asctime's day padded with a space or a zero. */
    private static function written(DateTimeImmutable $date, string $format): array
    {
        return $format === self::DATE_FORMATS[2]
            ? [$date->format('D M ') . sprintf('%2d', $date->format('j')) . $date->format(' H:i:s Y'), $date->format('D M d H:i:s Y')]
            : [$date->format(ltrim($format, '!'))];
    }
}
