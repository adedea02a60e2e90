<?php

namespace Resilient\Laravel\Console;

use Resilient\Funnel;
use Resilient\Laravel\ResilientManager;

/**
 * The shared state of every configured name, read from the host's segment: what a funnel allows,
 * how many leases all processes hold now, how much of the retry budget is left, and whether the
 * circuit breaker is open.
 *
 * A name may appear under `clients` (its `funnel` / `budget` options; a client without `budget`
 * uses the default budget, as the extension does) and under `funnels` / `budgets`. A funnel is
 * one shared entry per name, reported once. A retry budget is its name and its window: a
 * `budgets` entry with another window than the client's is another budget, counted apart, and
 * one with another ratio or floor judges the same counters differently. The row's `budget` is
 * the one the client spends; `budgets_entry` is the `budgets` entry when it is not that budget.
 */
final class UpstreamStatus
{
    /** The client's budget when its options do not set one (crates/http ClientConfig::default). */
    private const CLIENT_BUDGET = ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0];

    /**
     * @param ResilientManager|null $manager reads each client as it runs (its entry over `defaults`)
     * @return array<string, array{funnel: ?array, budget: ?array, budgets_entry: ?array, backend: string, trouble: list<string>}>
     */
    public static function of(array $config, ?ResilientManager $manager = null): array
    {
        $names = [];
        $onRedis = [];
        $invalid = [];
        $unbuilt = [];
        foreach (ResilientManager::sectionOf($config, 'clients') as $name => $options) {
            if (! is_array($options)) {
                // Reported on its row, not cast: every other name is still shown.
                $invalid[$name] = sprintf('resilient.clients.%s: must be an array of client options, got %s', $name, get_debug_type($options));
                $names[$name] ??= [];
                continue;
            }
            $options = $manager?->clientConfig((string) $name) ?? $options;
            // A client its config cannot build throws at every call (a `funnel` that is not an
            // array, a learned funnel's `max` of 'x', a learned funnel or a Redis URL the redis
            // backend refuses): said in its words, not shown as counters. Building one does not
            // connect to Redis, so a client on Redis is checked too, with Redis down as well.
            if (($problem = $manager?->clientProblem((string) $name)) !== null) {
                $unbuilt[$name] = $problem;
            }
            if ($manager?->onRedis((string) $name)) {
                // Its funnel and budget live on Redis: this host's segment holds none of them
                // (a `funnels` / `budgets` entry of the same name is this host's, shown below).
                $onRedis[$name] = ['funnel' => isset($options['funnel']), 'budget' => ($options['budget'] ?? []) !== false];
                $names[$name] ??= [];
                continue;
            }
            if (isset($options['funnel']) && is_array($options['funnel'])) {
                $names[$name]['funnel'] = $options['funnel'];
                $names[$name]['funnel_from'] = ["resilient.clients.$name.funnel", true];
            }
            if (($budget = self::clientBudget($options)) !== null) {
                $names[$name]['budget'] = $budget;
                $names[$name]['budget_from'] = "resilient.clients.$name.budget";
            }
            $names[$name] ??= [];
        }
        foreach (ResilientManager::sectionOf($config, 'funnels') as $name => $options) {
            // As given: an entry that is not an array is reported, not cast into one.
            $names[$name]['funnel'] = $options;
            $names[$name]['funnel_from'] = ["resilient.funnels.$name", false];
        }
        foreach (ResilientManager::sectionOf($config, 'budgets') as $name => $options) {
            // As given: an entry that is not an array is reported, not cast into one.
            $names[$name]['entry'] = $options;
        }
        ksort($names);

        $breakers = self::breakerStates();
        $out = [];
        foreach ($names as $name => $parts) {
            $redis = $onRedis[$name] ?? ['funnel' => false, 'budget' => false];
            $clientProblem = $unbuilt[$name] ?? null;
            $funnel = match (true) {
                // A learned funnel's slots come from the client's options, which it refused.
                isset($parts['funnel']) && $clientProblem !== null && $parts['funnel_from'][1]
                    && ($parts['funnel']['limit'] ?? null) === 'auto' => null,
                isset($parts['funnel']) => self::funnel((string) $name, $parts['funnel'], ...$parts['funnel_from']),
                $redis['funnel'] => ['on_redis' => true],
                default => null,
            };
            $entryKey = "resilient.budgets.$name";
            $budget = match (true) {
                array_key_exists('budget', $parts) => self::budget((string) $name, $parts['budget'], $parts['budget_from']),
                $redis['budget'] => ['on_redis' => true],
                array_key_exists('entry', $parts) => self::budget((string) $name, $parts['entry'], $entryKey),
                default => null,
            };
            // The `budgets` entry beside the client's budget, unless it is that budget (this
            // host's, never the one on Redis).
            $entry = array_key_exists('entry', $parts) && ($redis['budget'] || (array_key_exists('budget', $parts)
                && ! self::sameBudget(self::budgetValues($parts['budget_from'], $parts['budget']), self::budgetValues($entryKey, $parts['entry']))))
                ? self::budget((string) $name, $parts['entry'], $entryKey) : null;
            $trouble = isset($invalid[$name]) ? [$invalid[$name]] : [];
            if (isset($funnel['error'])) {
                $trouble[] = $funnel['error'];
            }
            foreach ([$budget, $entry] as $b) {
                if (isset($b['error'])) {
                    $trouble[] = $b['error'];
                }
            }
            // Once: a client's funnel or budget entry that fails is already named above.
            if ($clientProblem !== null && ! self::failsFromClient($funnel, $budget, $parts, (string) $name)) {
                $trouble[] = $clientProblem;
            }
            if ($funnel !== null && ($funnel['full'] ?? false)) {
                $trouble[] = "funnel full: {$funnel['in_flight']} of {$funnel['current_limit']} in flight";
            }
            foreach ([$budget, $entry] as $b) {
                if ($b['spent'] ?? false) {
                    // With two budgets on the row, which one.
                    $trouble[] = sprintf('retry budget spent%s: %d retries of %.1f allowed',
                        $entry === null ? '' : " ({$b['from']})", $b['retries'], $b['allowed']);
                }
            }
            // 'open' is also a breaker past its open_for whose probe no call has made yet.
            if (($breakers[$name] ?? null) === 'open') {
                $trouble[] = 'circuit breaker open: calls are refused until its open_for ends, then the next one probes the upstream';
            }
            $out[$name] = ['funnel' => $funnel, 'budget' => $budget, 'budgets_entry' => $entry, 'backend' => isset($onRedis[$name]) ? 'redis' : 'shm', 'trouble' => $trouble];
        }

        return $out;
    }

    /**
     * Each name's circuit breaker state, as the host's last call left it; none where there is
     * no segment to read (an extension without Metrics, or an unusable segment: the degraded
     * mode, which status reports on its own).
     *
     * @return array<string, ?string>
     */
    private static function breakerStates(): array
    {
        if (! class_exists(\Resilient\Metrics::class)) {
            return [];
        }
        try {
            $snapshot = \Resilient\Metrics::snapshot();
        } catch (\RuntimeException) {
            // Resilient\SharedMemoryError: this process cannot use the host's segment.
            return [];
        }

        return array_map(fn ($metrics) => $metrics['breaker']['state'] ?? null, $snapshot);
    }

    /** Whether the row's funnel or budget error comes from the client's own entry. */
    private static function failsFromClient(?array $funnel, ?array $budget, array $parts, string $name): bool
    {
        return (isset($funnel['error']) && $parts['funnel_from'][1])
            || (isset($budget['error']) && ($parts['budget_from'] ?? null) === "resilient.clients.$name.budget");
    }

    /**
     * The funnel's state, or `['error' => ...]` naming $key when the entry cannot build the
     * Funnel its users build (they would throw at every use): checked as ResilientManager does.
     * A client's funnel ($ofClient) may hold options only the client reads (`wait`); a
     * `funnels` entry may not.
     */
    private static function funnel(string $name, mixed $o, string $key, bool $ofClient): array
    {
        // An adaptive funnel ('limit' => 'auto') counts leases up to its 'max'; what it admits
        // is the learned limit's whole slots (before anything is learned, `initial`). Anything
        // else is a fixed limit, which must be given. Only a client applies a learned limit: a
        // `funnels` entry with 'auto' is refused below, as Resilient::funnel() refuses it.
        $adaptive = $ofClient && is_array($o) && ($o['limit'] ?? null) === 'auto';
        try {
            if ($adaptive) {
                $slots = (int) ($o['max'] ?? 64);
                $reserve = (int) ($o['reserve'] ?? 0);
                $f = new Funnel($name, $slots, min($reserve, $slots - 1));
            } else {
                $arguments = ResilientManager::funnelArguments($key, $ofClient && is_array($o)
                    ? array_intersect_key($o, array_flip(ResilientManager::FUNNEL_ARGUMENTS)) : $o);
                $f = ResilientManager::buildFunnel($key, $name, $arguments);
                $slots = $f->limit();
                $reserve = $f->reserve();
            }
        } catch (\InvalidArgumentException $e) {
            return ['error' => $e->getMessage()];
        } catch (\ValueError|\TypeError $e) {
            // the learned funnel's slots and reserve, built here
            return ['error' => "$key: " . $e->getMessage()];
        }
        $inFlight = $f->inFlight();
        $limit = $slots;
        if ($adaptive) {
            $learned = $f->stats()['learned'] ?? null;
            $min = (int) ($o['min'] ?? 1);
            $limit = is_array($learned)
                ? (int) floor((float) $learned['limit'])
                : (int) ($o['initial'] ?? min(max(4, $min), $slots));
            $limit = max(1, min($limit, $slots));
        }
        // Background callers get the limit less the reserve; under a learned limit the reserve
        // is scaled when the limit is small (docs/adaptive-limit.md, "reserve").
        $background = $limit - ($adaptive ? min($reserve, intdiv($limit, 2)) : $reserve);

        return [
            'limit' => $adaptive ? 'auto' : $limit,
            'current_limit' => $limit,
            'reserve' => $reserve,
            // Queue workers, the scheduler and artisan are background callers.
            'background_limit' => $background,
            'in_flight' => $inFlight,
            'full' => $inFlight >= $limit,
            'background_full' => $inFlight >= $background,
            'degraded' => $f->isDegraded(),
        ];
    }

    /**
     * The budget a client's calls spend, as RetryBudget arguments: its `budget` options filled
     * with the default budget's, as the client fills them; null when it has none (`false`) or
     * one the client refuses (not an array: said in the client's words).
     */
    public static function clientBudget(array $options): ?array
    {
        if (! array_key_exists('budget', $options)) {
            return self::CLIENT_BUDGET;
        }

        return is_array($options['budget'])
            ? array_intersect_key($options['budget'], self::CLIENT_BUDGET) + self::CLIENT_BUDGET
            : null;
    }

    /**
     * A budget's ratio, floor and window as numbers, what is not set filled with the default's
     * (a client's and a RetryBudget's are the same); the window (seconds) cut to whole ms, as
     * the extension keeps it. Null when $o cannot build a budget: that is said on its own.
     *
     * @return array{ratio: float, floor: float, window: float}|null
     */
    public static function budgetValues(string $key, mixed $o): ?array
    {
        try {
            $o = ResilientManager::budgetArguments($key, $o) + self::CLIENT_BUDGET;
        } catch (\InvalidArgumentException) {
            return null;
        }
        foreach ($o as $value) {
            if (! is_numeric($value) || ! is_finite((float) $value)) {
                return null;
            }
        }

        return [
            'ratio' => (float) $o['ratio'],
            'floor' => (float) $o['floor'],
            // To the ns, then whole ms (Rust's Duration::from_secs_f64 and as_millis).
            'window' => floor(round((float) $o['window'] * 1e9) / 1e6) / 1000,
        ];
    }

    /** Whether both are the same budget: the same counters (window) judged alike (ratio, floor). */
    public static function sameBudget(?array $a, ?array $b): bool
    {
        return $a !== null && $a === $b;
    }

    /**
     * The budget's window, or `['error' => ...]` naming $key when its values cannot build the
     * RetryBudget its users build: checked as ResilientManager does. `from` is $key.
     */
    private static function budget(string $name, mixed $o, string $key): array
    {
        try {
            $b = ResilientManager::buildBudget($key, $name, ResilientManager::budgetArguments($key, $o));
        } catch (\InvalidArgumentException $e) {
            return ['error' => $e->getMessage()];
        }
        $stats = $b->stats();
        // The next retry needs one whole retry of room; a budget that gave none has not been
        // spent, only not earned yet (no floor, few originals): nothing to report.
        $stats['spent'] = $stats['remaining'] < 1.0 && $stats['retries'] > 0;
        $stats['from'] = $key;

        return $stats;
    }
}
