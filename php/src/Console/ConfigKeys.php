<?php

namespace Resilient\Laravel\Console;

use Resilient\Laravel\ResilientServiceProvider;

/**
 * Keys of config/resilient.php that nothing reads. A typo outside a client's entry
 * (`log_chanel`, `queue.release_delays`) is otherwise ignored without a word and the setting
 * meant keeps its default. The keys known are those of the package's own config file (so the
 * list cannot drift from it); `defaults` holds client options, which the extension knows.
 */
final class ConfigKeys
{
    /** Sections whose keys are names (of a client, a funnel, a budget): each entry is checked where it is built. */
    private const NAMED = ['clients', 'funnels', 'budgets'];

    /**
     * One message per unknown key, at the top of `resilient` and in each of its sections,
     * naming the key meant when one is close.
     *
     * @return list<string>
     */
    public static function problems(array $config): array
    {
        $known = require ResilientServiceProvider::CONFIG;
        $problems = [];
        foreach ($config as $key => $value) {
            if (! array_key_exists($key, $known)) {
                $problems[] = self::unknown("resilient.$key", 'unknown key, ignored', (string) $key, array_keys($known));
            } elseif ($key === 'log_channel' && ($problem = self::logChannelProblem($value)) !== null) {
                $problems[] = $problem;
            } elseif ($key === 'funnels' || $key === 'budgets') {
                // A section that is no array of entries (`clients` is said where its entries are read).
                try {
                    \Resilient\Laravel\ResilientManager::sectionOf($config, $key);
                } catch (\InvalidArgumentException $e) {
                    $problems[] = $e->getMessage();
                }
            } elseif ($key === 'defaults' && is_array($value)) {
                array_push($problems, ...self::notClientOptions($value));
            } elseif (is_array($value) && is_array($known[$key]) && ! array_is_list($known[$key]) && ! in_array($key, self::NAMED, true)) {
                foreach (array_keys(array_diff_key($value, $known[$key])) as $inner) {
                    $problems[] = self::unknown("resilient.$key.$inner", 'unknown key, ignored', (string) $inner, array_keys($known[$key]));
                }
            }
        }

        return $problems;
    }

    /** Why `resilient.log_channel` cannot name a channel (every client build throws it), or null. */
    public static function logChannelProblem(mixed $channel): ?string
    {
        return $channel === null || $channel === false || is_string($channel)
            ? null
            : sprintf("resilient.log_channel: must be a log channel's name (a string), or null for none, got %s", get_debug_type($channel));
    }

    /**
     * The keys of `defaults` no client takes. A null there is dropped as "not set" before any
     * client sees it, so only the extension can tell a typo from an option: each key is given
     * to a client validator (bound to nothing shared), which names an unknown one and the
     * options it knows.
     *
     * @return list<string>
     */
    private static function notClientOptions(array $defaults): array
    {
        if (! class_exists(\Resilient\Client::class, false) || ! method_exists(\Resilient\Client::class, 'validator')) {
            return [];
        }
        $problems = [];
        foreach (array_keys($defaults) as $key) {
            try {
                \Resilient\Client::validator('resilient-config-check', [$key => null]);
            } catch (\Throwable $e) {
                // Anything else is about the value (null here), which clients report as they run.
                if (preg_match('/: unknown option \(known: ([^)]*)\)$/', $e->getMessage(), $m) === 1) {
                    $problems[] = self::unknown("resilient.defaults.$key", 'not a client option', (string) $key, explode(', ', $m[1]));
                }
            }
        }

        return $problems;
    }

    /** @param list<int|string> $known */
    private static function unknown(string $path, string $what, string $key, array $known): string
    {
        $close = self::closest($key, $known);

        return $close !== null
            ? "$path: $what (did you mean '$close'?)"
            : "$path: $what (known: " . implode(', ', $known) . ')';
    }

    /** The known key a slip of a few letters away from $key (fewer for a short one), or null. */
    private static function closest(string $key, array $known): ?string
    {
        $best = null;
        $distance = PHP_INT_MAX;
        foreach ($known as $name) {
            $d = levenshtein(strtolower($key), strtolower((string) $name));
            if ($d < $distance) {
                [$best, $distance] = [(string) $name, $d];
            }
        }

        return $distance <= max(1, intdiv(strlen($key), 3)) ? $best : null;
    }
}
