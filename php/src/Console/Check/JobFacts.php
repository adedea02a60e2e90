<?php

namespace Resilient\Laravel\Console\Check;

use Resilient\Laravel\Queue\JitteredBackoff;

/**
 * What a job class says about its time and retries, read without running it: `$timeout`,
 * `$tries`, `$maxExceptions`, `$connection`, its backoff (none, fixed or jittered), the named
 * clients its source calls (`Resilient::client('x')`, `Http::resilient('x')`, `new Client('x')`),
 * whether it wraps itself in the WithinDeadline job middleware, and the names of the
 * Queue\\Funnel middleware it takes from config (`new Funnel('x')` without a limit).
 */
final class JobFacts
{
    /**
     * @param list<string> $clients
     * @param list<string> $funnels
     * @param 'none'|'fixed'|'jittered' $backoffKind
     */
    private function __construct(
        public readonly string $class,
        public readonly ?int $timeout,
        public readonly ?int $tries,
        public readonly ?int $maxExceptions,
        public readonly bool $retryUntil,
        public readonly ?string $connection,
        public readonly string $backoffKind,
        public readonly array $backoff,
        public readonly array $clients,
        public readonly false|null|float $withinDeadline,
        public readonly array $funnels = [],
    ) {
    }

    public static function of(string $class): self
    {
        $r = new \ReflectionClass($class);
        $defaults = $r->getDefaultProperties();
        $source = (string) @file_get_contents((string) $r->getFileName());
        [$kind, $values] = self::backoff($r, $defaults);

        return new self(
            $class,
            self::intOrNull($defaults['timeout'] ?? null),
            self::intOrNull($defaults['tries'] ?? null),
            self::intOrNull($defaults['maxExceptions'] ?? null),
            $r->hasMethod('retryUntil'),
            is_string($defaults['connection'] ?? null) ? $defaults['connection'] : null,
            $kind,
            $values,
            self::clientsCalled($source),
            self::withinDeadline($source),
            self::funnelsFromConfig($source),
        );
    }

    /**
     * The names of `new Funnel('x', ...)` (the queue middleware) whose limit comes from config:
     * no second argument, or only named ones other than `limit`.
     *
     * @return list<string>
     */
    private static function funnelsFromConfig(string $source): array
    {
        // Unqualified, `Funnel` must be the queue middleware the file imports.
        $imported = str_contains($source, 'Resilient\\Laravel\\Queue\\Funnel');
        preg_match_all('/new\s+(\\\\?Resilient\\\\Laravel\\\\Queue\\\\)?Funnel\(\s*([\'"])([^\'"$]+)\2\s*(\)|,[^)]*\))/', $source, $m, PREG_SET_ORDER);
        $names = [];
        foreach ($m as [, $qualified, , $name, $rest]) {
            if ($qualified === '' && ! $imported) {
                continue;
            }
            // A name built at run time (`'sap-' . $x`, `"sap-{$x}"`) is not matched at all.
            $positional = preg_match('/^,\s*(?![A-Za-z_]\w*\s*:)(?!null\b)\S/i', $rest) === 1;
            if (! $positional && ! preg_match('/\blimit\s*:\s*(?!null\b)\S/i', $rest)) {
                $names[] = $name;
            }
        }
        $names = array_values(array_unique($names));
        sort($names);

        return $names;
    }

    /** @return list<string> */
    private static function clientsCalled(string $source): array
    {
        preg_match_all('/(?:->|::)(?:client|resilient)\(\s*[\'"]([^\'"]+)[\'"]/', $source, $calls);
        preg_match_all('/new\s+\\\\?(?:Resilient\\\\)?Client\(\s*[\'"]([^\'"]+)[\'"]/', $source, $news);
        $names = array_values(array_unique([...$calls[1], ...$news[1]]));
        sort($names);

        return $names;
    }

    /** false: no WithinDeadline; null: without argument ($timeout − margin); float: its seconds. */
    private static function withinDeadline(string $source): false|null|float
    {
        if (! preg_match('/WithinDeadline\(\s*([0-9.]*)\s*[,)]/', $source, $m)) {
            return false;
        }

        return $m[1] === '' ? null : (float) $m[1];
    }

    /** @return array{0: 'none'|'fixed'|'jittered', 1: list<int|string>} */
    private static function backoff(\ReflectionClass $r, array $defaults): array
    {
        if (in_array(JitteredBackoff::class, self::traitsOf($r), true)) {
            return ['jittered', []];
        }
        if (isset($defaults['backoff'])) {
            return ['fixed', (array) $defaults['backoff']];
        }
        if (! $r->hasMethod('backoff')) {
            return ['none', []];
        }
        // A backoff() of its own: jittered if asking again gives other numbers.
        try {
            $job = $r->newInstanceWithoutConstructor();
            $seen = [];
            for ($i = 0; $i < 8; $i++) {
                $seen[json_encode($job->backoff())] = true;
            }
        } catch (\Throwable) {
            return ['jittered', []];   // cannot tell without a constructed job: assume it knows
        }

        return count($seen) > 1 ? ['jittered', []] : ['fixed', (array) json_decode((string) array_key_first($seen), true)];
    }

    /** @return list<string> */
    private static function traitsOf(\ReflectionClass $r): array
    {
        $traits = [];
        for ($c = $r; $c !== false; $c = $c->getParentClass()) {
            $stack = $c->getTraitNames();
            while ($stack !== []) {
                $t = array_pop($stack);
                if (! in_array($t, $traits, true)) {
                    $traits[] = $t;
                    array_push($stack, ...(new \ReflectionClass($t))->getTraitNames());
                }
            }
        }

        return $traits;
    }

    private static function intOrNull(mixed $v): ?int
    {
        return is_numeric($v) ? (int) $v : null;
    }
}
