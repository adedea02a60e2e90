<?php
declare(strict_types=1);

/** The page's settings (from the FPM pool env the runner writes) and its three possible answers. */
final class Page
{
    /** Shown when there is no live quote: clearly an estimate, never 0 (seed 000). */
    private const ESTIMATE = ['price_thb' => 60, 'is_estimate' => true];

    /** The resilient client's retry budget when the pool's env names none (the runner always does: lab/src/params.rs). */
    public const DEFAULT_BUDGET = ['ratio' => 0.08, 'floor' => 5, 'window' => 10.0];

    public static function upstreamUrl(): string
    {
        return (string) getenv('LAB_UPSTREAM_URL');
    }

    public static function deadlineMs(): int
    {
        return (int) (getenv('LAB_DEADLINE_MS') ?: 850);
    }

    /** How long the resilient client's funnel waits for a free slot; 0 = fail fast. */
    public static function funnelWaitMs(): int
    {
        return (int) (getenv('LAB_FUNNEL_WAIT_MS') ?: 0);
    }

    /** Funnel slots the resilient client keeps for web callers (the mixed scenario); 0 = none. */
    public static function funnelReserve(): int
    {
        return (int) (getenv('LAB_FUNNEL_RESERVE') ?: 0);
    }

    /** Whether that funnel shares its slots under contention ('share' => true, the mixed scenario). */
    public static function funnelShare(): bool
    {
        return getenv('LAB_FUNNEL_SHARE') === '1';
    }

    /** The resilient client's retry budget (the runner's --budget; its default if unset). */
    public static function budget(): array
    {
        // Not `?:`: a ratio or floor of 0 arrives as "0", which is falsy.
        $env = fn (string $name, float $default): float => ($v = getenv($name)) !== false && $v !== '' ? (float) $v : $default;
        return [
            'ratio' => $env('LAB_BUDGET_RATIO', self::DEFAULT_BUDGET['ratio']),
            'floor' => (int) $env('LAB_BUDGET_FLOOR', self::DEFAULT_BUDGET['floor']),
            'window' => $env('LAB_BUDGET_WINDOW', self::DEFAULT_BUDGET['window']),
        ];
    }

    /** The resilient client's funnel limit: 4 (the seed's), 16, or 'auto' (learned). */
    public static function funnelLimit(): int|string
    {
        $limit = (string) (getenv('LAB_FUNNEL_LIMIT') ?: '4');
        return $limit === 'auto' ? 'auto' : (int) $limit;
    }

    /**
     * The Redis backend of variant resilient-redis (the lab's redis-server, keys under `lab:`);
     * null (shared memory) for the others.
     */
    public static function backend(string $variant): ?string
    {
        return $variant === 'resilient-redis'
            ? 'redis://127.0.0.1:'.(int) getenv('LAB_REDIS_PORT').'/0?prefix=lab:'
            : null;
    }

    /** The call's X-Request-Id: `w-` and, in the two-hosts scenario, the host (`w-a-…`). */
    public static function requestId(): string
    {
        $host = (string) getenv('LAB_HOST');
        return 'w-'.($host !== '' ? $host.'-' : '').bin2hex(random_bytes(6));
    }

    public static function live(string $variant, mixed $quote, int $started): void
    {
        self::send(200, ['status' => 'live', 'variant' => $variant, 'quote' => $quote, 'ms' => self::ms($started)]);
    }

    public static function fallback(string $variant, string $reason, int $started): void
    {
        self::send(200, ['status' => 'fallback', 'variant' => $variant, 'reason' => $reason,
            'estimate' => self::ESTIMATE, 'ms' => self::ms($started)]);
    }

    public static function error(string $variant, Throwable $e, int $started): void
    {
        error_log('lab checkout error: '.get_class($e).': '.$e->getMessage());
        self::send(500, ['status' => 'error', 'variant' => $variant, 'class' => get_class($e), 'ms' => self::ms($started)]);
    }

    private static function ms(int $started): float
    {
        return round((hrtime(true) - $started) / 1e6, 2);
    }

    private static function send(int $code, array $body): void
    {
        http_response_code($code);
        header('Content-Type: application/json');
        echo json_encode($body);
    }
}
