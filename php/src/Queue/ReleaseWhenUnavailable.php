<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Http\Client\RequestException;
use Resilient\BudgetExhausted;
use Resilient\FunnelFull;
use Resilient\Unavailable;

/**
 * Job middleware: a job that meets our own refusal goes back on the queue instead of failing.
 *
 *     public function middleware(): array { return [new ReleaseWhenUnavailable()]; }
 *
 * - FunnelFull, BudgetExhausted, CircuitOpen (also under the exception `Http::resilient()`
 *   throws when one stopped the retries of attempts that got no answer: Laravel's
 *   ConnectionException, or Guzzle's RequestException for a body cut short): nothing was
 *   wrong with the job, the host is
 *   protecting the upstream; release with a delay drawn from the range (constructor, else
 *   `resilient.queue.release_delay`, else [5, 30] s), so the refused jobs come back spread out.
 *   A BudgetExhausted also comes back no sooner than the job's own backoff for this attempt
 *   (`$backoff`, `backoff()`): it refused the retry of an attempt that failed, so the upstream
 *   is failing now, and a release counts as an attempt.
 * - Any of our exceptions whose last response carries Retry-After (an UpstreamFailed; a
 *   DeadlineExceeded thrown because the wait asked for did not fit the deadline; a refusal
 *   after such an answer): release no sooner than it; so also Laravel's RequestException
 *   (`Http::resilient()->...->throw()`, where such an answer comes back as a Laravel response)
 *   of a 429 or 503 with Retry-After.
 *   Unless it is a FunnelFull or CircuitOpen, also no sooner than the job's own backoff for
 *   this attempt.
 * - Anything else (DeadlineExceeded or UpstreamFailed without Retry-After, other exceptions)
 *   is rethrown: the job's own `$tries` and `backoff()` decide, as without this middleware.
 *
 * A release counts as an attempt (Laravel's rule), so give the job `$tries` or `retryUntil()`
 * room for it. Where nothing can take the job back (the `sync` queue, a job run by hand), the
 * refusal is rethrown instead (see Released).
 */
final class ReleaseWhenUnavailable
{
    /**
     * Our refusals, matched by class name with `instanceof`: a name whose class is not loaded
     * (CircuitOpen on an extension build without the breaker) matches nothing, no error.
     */
    private const REFUSALS = [FunnelFull::class, BudgetExhausted::class, 'Resilient\\CircuitOpen'];

    /** Refusals released without the job's backoff: unlike BudgetExhausted, they need not follow a failed attempt. */
    private const NO_BACKOFF = [FunnelFull::class, 'Resilient\\CircuitOpen'];

    private ReleaseDelay $delay;

    public function __construct(?int $minDelay = null, ?int $maxDelay = null)
    {
        $this->delay = $minDelay === null && $maxDelay === null
            ? ReleaseDelay::configured()
            : ReleaseDelay::between($minDelay ?? 0, $maxDelay ?? $minDelay ?? 0);
    }

    /** @param object $job a queued job using InteractsWithQueue */
    public function handle($job, Closure $next)
    {
        $ours = $seconds = null;
        try {
            return $next($job);
        } catch (Unavailable $e) {
            $ours = $e;
        } catch (RequestException $e) {
            $seconds = self::delayForAnswer($e);
        } catch (\Throwable $e) {
            // Through Http::resilient(), attempts that got no answer, whose retries our refusal
            // may have stopped: the client's exception is under Laravel's ConnectionException
            // (or, for a body cut short, Guzzle's RequestException, which Laravel 8 lets through).
            $ours = self::under($e);
        }
        $seconds ??= $ours === null ? null : $this->delayFor($ours);
        if ($seconds === null) {
            throw $e;
        }
        if (! self::isOneOf($ours ?? $e, self::NO_BACKOFF) && ($backoff = ReleaseDelay::jobBackoff($job)) > $seconds) {
            // An attempt failed (the upstream's answer, or the retry of a failed attempt refused
            // by the budget): no sooner than the job's own backoff for this attempt either (a
            // release counts as one, and a short delay used up its `$tries` within seconds);
            // spread and bounded as a Retry-After is.
            $seconds = ReleaseDelay::afterRetryAfter($backoff);
        }
        Released::job($job, $seconds, fn () => $e);

        return null;
    }

    /** A Laravel RequestException's 429 or 503 with Retry-After: no sooner than it; else null. */
    public static function delayForAnswer(RequestException $e): ?int
    {
        $response = $e->response;
        if (! in_array($response->status(), [429, 503], true)) {
            return null;
        }
        $after = RetryAfter::longest($response->toPsrResponse()->getHeader('Retry-After'), microtime(true));

        return $after === null ? null : ReleaseDelay::afterRetryAfter($after);
    }

    /** Seconds to wait before the job runs again, or null when this exception is not ours to absorb. */
    public function delayFor(Unavailable $e): ?int
    {
        $after = RetryAfter::of($e);
        $told = $after === null ? null : ReleaseDelay::afterRetryAfter($after);
        if (self::isOneOf($e, self::REFUSALS)) {
            return max($this->delay->draw(), $told ?? 0);
        }

        return $told;
    }

    /** The client's exception another was made from, if any. */
    private static function under(\Throwable $e): ?Unavailable
    {
        for ($cause = $e->getPrevious(); $cause !== null; $cause = $cause->getPrevious()) {
            if ($cause instanceof Unavailable) {
                return $cause;
            }
        }

        return null;
    }

    /** @param list<string> $classes */
    private static function isOneOf(\Throwable $e, array $classes): bool
    {
        foreach ($classes as $class) {
            if ($e instanceof $class) {
                return true;
            }
        }

        return false;
    }
}
