<?php

namespace Resilient\Laravel\Middleware;

use Closure;
use Resilient\Deadline;

/**
 * One deadline for everything a web request or a queued job does upstream.
 *
 * Route middleware: `->middleware('resilient.deadline:0.9')`.
 * Job middleware:   `public function middleware() { return [new WithinDeadline(60)]; }`
 *
 * Every Resilient\Client call inside gets min(its own deadline, what is left of this one).
 */
final class WithinDeadline
{
    public function __construct(private ?float $seconds = null)
    {
    }

    /** @param mixed $passable a Request or a job */
    public function handle($passable, Closure $next, $seconds = null)
    {
        $seconds = (float) ($seconds ?? $this->seconds ?? 30.0);

        return Deadline::within($seconds, fn () => $next($passable));
    }
}
