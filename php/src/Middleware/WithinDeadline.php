<?php

namespace Resilient\Laravel\Middleware;

use Closure;
use InvalidArgumentException;
use Resilient\Deadline;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Laravel\Queue\WithinDeadline as QueueWithinDeadline;
use Symfony\Component\HttpFoundation\StreamedResponse;

/**
 * One deadline for everything a web request or a queued job does upstream.
 *
 * Route middleware: `->middleware('resilient.deadline:0.9')`.
 * Job middleware:   `public function middleware() { return [new WithinDeadline(60)]; }`
 * (for jobs prefer Resilient\Laravel\Queue\WithinDeadline: without seconds it follows the job's
 * `$timeout`, where this one is always 30 s).
 *
 * Every Resilient\Client call inside gets min(its own deadline, what is left of this one),
 * also those a streamed response's body makes after the route returned.
 *
 * The seconds must be a finite number above 0 and at most a year (what `Deadline::within()`
 * takes, Queue\WithinDeadline::MAX_SECONDS): anything else (`:abc`, `:INF`, `:-1`, `:1.5s`,
 * or `:0,9`, which Laravel splits on the comma into '0' and '9') throws instead of becoming a
 * deadline of 0 s, or of whatever PHP's (float) cast makes of it.
 */
final class WithinDeadline
{
    public function __construct(private ?float $seconds = null)
    {
        if ($seconds !== null && ! self::valid($seconds)) {
            throw new InvalidArgumentException(sprintf(
                'resilient: new WithinDeadline(%s): the seconds must be %s', var_export($seconds, true), self::RULE,
            ));
        }
    }

    /** @param mixed $passable a Request or a job */
    public function handle($passable, Closure $next, string ...$parameters)
    {
        ExtensionCheck::assertFits();
        $seconds = $parameters === [] ? ($this->seconds ?? 30.0) : self::parameter($parameters);
        $started = hrtime(true);
        $response = Deadline::within($seconds, fn () => $next($passable));
        if ($response instanceof StreamedResponse) {
            self::streamWithin($response, $seconds, $started);
        }

        return $response;
    }

    /**
     * A streamed body is written after this middleware returned (by `send()`): its callback
     * runs within what is left then of the same deadline, counted from `$started` (none left:
     * its calls fail at once, as any call past the request's deadline).
     */
    private static function streamWithin(StreamedResponse $response, float $seconds, int $started): void
    {
        // Symfony 5.4 (Laravel 8) has no getCallback().
        $callback = method_exists($response, 'getCallback')
            ? $response->getCallback()
            : (fn () => $this->callback)->call($response);
        if ($callback === null) {
            return;
        }
        $response->setCallback(fn () => Deadline::within(
            max(0.0, $seconds - (hrtime(true) - $started) / 1e9),
            $callback,
        ));
    }

    /** The route parameter as seconds, or an exception naming it. */
    private static function parameter(array $parameters): float
    {
        $given = 'resilient.deadline:' . implode(',', $parameters);
        if (count($parameters) > 1) {
            throw new InvalidArgumentException(sprintf(
                "resilient: route middleware %s: one parameter, the seconds, got %d ('%s'): "
                . 'Laravel splits middleware parameters on commas%s',
                $given, count($parameters), implode("', '", $parameters),
                count($parameters) === 2 ? ", write {$parameters[0]}.{$parameters[1]} with a dot" : '',
            ));
        }
        $text = trim($parameters[0]);
        if (! is_numeric($text) || ! self::valid((float) $text)) {
            throw new InvalidArgumentException(sprintf(
                "resilient: route middleware %s: the parameter must be the deadline in seconds, %s "
                . "(e.g. resilient.deadline:0.9), got '%s'",
                $given, self::RULE, $parameters[0],
            ));
        }

        return (float) $text;
    }

    private const RULE = 'a finite number above 0 and at most 31536000 (a year)';

    private static function valid(float $seconds): bool
    {
        return is_finite($seconds) && $seconds > 0 && $seconds <= QueueWithinDeadline::MAX_SECONDS;
    }
}
