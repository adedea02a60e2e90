<?php
declare(strict_types=1);

/**
 * The extension's client with the seed's policy: deadline 0.85 s, 0.3 s per attempt, 3 attempts,
 * full jitter 25..200 ms, a host-wide funnel of 4 and a retry budget, both in shared memory.
 * `$budget`: the runner's --budget (by default 8 % + 5 per 10 s window: see lab/README.md).
 * The funnel waits up to $funnelWaitMs for a free slot (seed 000: the wait counts
 * in the deadline); 0 fails fast, the contract's default (variant resilient-failfast). Needs ini
 * resilient.web_max_attempts=3 (set by the lab's php-fpm command line), since the web default
 * allows no retry. `$funnelReserve` slots are kept for web callers (the mixed scenario's
 * background workers, console context, may use only limit - reserve); `$breaker` adds the
 * circuit option (variant resilient-breaker). `$funnelLimit`: 4, 16 (resilient-16) or 'auto'
 * (resilient-adaptive); `$backend` a Redis URL instead of shared memory (variant
 * resilient-redis, the two-hosts scenario). `$funnelShare`: the funnel's `share` option (the
 * mixed scenario): under contention web keeps the reserve and the workers get the other slots.
 */
final class ResilientQuoteClient
{
    public function __construct(
        private string $url,
        private int $deadlineMs,
        private int $funnelWaitMs = 0,
        private int $funnelReserve = 0,
        private bool $breaker = false,
        private int|string $funnelLimit = 4,
        private ?string $backend = null,
        private bool $funnelShare = false,
        private array $budget = Page::DEFAULT_BUDGET,
    ) {}

    public function quote(string $postcode, string $requestId = ''): array
    {
        $parts = parse_url($this->url);
        $client = new Resilient\Client('shipping', [
            'base_url' => $parts['scheme'].'://'.$parts['host'].':'.$parts['port'],
            'connect_timeout' => 0.3,
            'timeout' => 0.3,
            'deadline' => $this->deadlineMs / 1000,
            'max_attempts' => 3,
            'backoff' => ['base' => 0.025, 'cap' => 0.2],
            'funnel' => ['reserve' => $this->funnelReserve, 'lease' => 5.0, 'wait' => $this->funnelWaitMs / 1000]
                // The mixed scenario: under contention web keeps the reserve, the workers the rest.
                + ($this->funnelShare ? ['share' => true] : [])
                // 'auto' (variant resilient-adaptive): learned, told nothing of the upstream's slots.
                + ($this->funnelLimit === 'auto' ? ['limit' => 'auto', 'min' => 1, 'max' => 32, 'initial' => 1] : ['limit' => $this->funnelLimit]),
            'budget' => $this->budget,
            'backend' => $this->backend ?? 'shm',
        ] + ($this->backend !== null ? [
            // Variant resilient-redis: funnel, budget and breaker on Redis, shared by both hosts;
            // should Redis fail, each host falls back to its own funnel of 4 / 2.
            'on_backend_error' => 'local',
            'hosts' => 2,
        ] : []) + ($this->breaker ? [
            // Variant resilient-breaker: opens at 50 % failures over 20+ calls in 10 s, or after
            // 20 failures in a row (consecutive_failures defaults to min_calls).
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 20, 'window' => 10.0, 'open_for' => 5.0],
        ] : []));
        try {
            $response = $client->get($parts['path'], ['postcode' => $postcode],
                $requestId !== '' ? ['headers' => ['X-Request-Id' => $requestId]] : []);
        } catch (Resilient\FunnelFull $e) {
            throw new QuoteUnavailable('funnel_full', $e->getMessage(), $e);
        } catch (Resilient\BudgetExhausted $e) {
            throw new QuoteUnavailable('budget', $e->getMessage(), $e);
        } catch (Resilient\DeadlineExceeded $e) {
            throw new QuoteUnavailable('deadline', $e->getMessage(), $e);
        } catch (Resilient\CircuitOpen $e) {
            throw new QuoteUnavailable('circuit', $e->getMessage(), $e);
        } catch (Resilient\UpstreamFailed $e) {
            throw new QuoteUnavailable('upstream', $e->getMessage(), $e);
        }
        if (! $response->ok()) {
            throw new UnexpectedValueException('upstream answered HTTP '.$response->status());
        }
        return $response->json();
    }
}
