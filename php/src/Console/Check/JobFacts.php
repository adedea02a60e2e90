<?php

namespace Resilient\Laravel\Console\Check;

use Resilient\Laravel\Queue\JitteredBackoff;

/**
 * What a job class says about its time and retries, read without running it: `$timeout`,
 * `$tries`, `$maxExceptions`, `retryUntil()`, `$connection` (or `->onConnection('x')`), its backoff (none, fixed or
 * jittered), the named clients its source calls (`Resilient::client('x')`,
 * `Http::resilient(name: 'x')`, `new Client(self::X)`), whether it wraps itself in a
 * WithinDeadline middleware (the queue one, or the route one, which is 30 s whatever the
 * job's timeout), the names of the Queue\\Funnel middleware it takes from config
 * (`new Funnel('x')` without a limit), which of our middleware put it back on the queue, and
 * whether it can go back (a release()).
 *
 * Names and seconds are read where they are constant (a literal, a class constant); one
 * computed at run time is listed in `unchecked` rather than passing unseen.
 */
final class JobFacts
{
    public const QUEUE_DEADLINE = 'Resilient\\Laravel\\Queue\\WithinDeadline';
    public const ROUTE_DEADLINE = 'Resilient\\Laravel\\Middleware\\WithinDeadline';
    private const QUEUE_FUNNEL = 'Resilient\\Laravel\\Queue\\Funnel';
    private const QUEUE_RELEASE = 'Resilient\\Laravel\\Queue\\ReleaseWhenUnavailable';

    /** The route middleware's seconds when given none (Middleware\\WithinDeadline::handle). */
    private const ROUTE_DEFAULT = 30.0;

    /**
     * @param list<string> $clients names given to `Resilient::client()`, `->resilient()`, `new Client()`
     * @param list<string> $maybeClients names given to another `->client()`/`::client()` (maybe
     *        another library's): a client only when config defines it
     * @param false|null|float $withinDeadline false: no WithinDeadline; null: the queue one without
     *        seconds ($timeout − margin); a float: its seconds (INF: known only at run time)
     * @param list<string> $funnels
     * @param list<string> $unchecked what the check could not read, said as such
     * @param list<string> $releasedBy our middleware the job makes that release it (each a
     *        try): `ReleaseWhenUnavailable`, `Queue\\Funnel`
     * @param 'none'|'fixed'|'jittered' $backoffKind
     */
    private function __construct(
        public readonly string $class,
        public readonly ?int $timeout,
        public readonly ?int $tries,
        public readonly ?int $maxExceptions,
        public readonly bool $retryUntil,
        public readonly ?string $connection,
        /** The job picks its connection at run time (`onConnection($queue)`), or in several places. */
        public readonly bool $connectionAtRunTime,
        public readonly string $backoffKind,
        public readonly array $backoff,
        public readonly array $clients,
        public readonly false|null|float $withinDeadline,
        public readonly array $funnels = [],
        public readonly bool $routeDeadline = false,
        public readonly bool $routeDeadlineDefault = false,
        public readonly array $unchecked = [],
        public readonly array $maybeClients = [],
        public readonly array $releasedBy = [],
        /** Whether it has a release() (InteractsWithQueue's) for our middleware to call. */
        public readonly bool $releasable = true,
    ) {
    }

    public static function of(string $class): self
    {
        $r = new \ReflectionClass($class);
        $defaults = $r->getDefaultProperties();
        $source = self::source($r);
        // A `middleware()` or `handle()` the job inherits from a class of the app above it (an
        // abstract BaseJob) is read in that class's file, beside the job's own.
        $middleware = [$source, ...self::inheritedSource($r, 'middleware')];
        $handle = [$source, ...self::inheritedSource($r, 'handle')];
        [$kind, $values] = self::backoff($r, $defaults);
        $unchecked = [];
        [$deadline, $route, $routeDefault] = [false, false, false];
        foreach ($middleware as $file) {
            [$deadline, $route, $routeDefault] = self::withinDeadline($file, $unchecked);
            if ($deadline !== false) {
                break;
            }
        }
        [$clients, $maybeClients] = [[], []];
        foreach ($handle as $file) {
            [$certain, $maybe] = self::clientsCalled($file, $unchecked);
            $clients = self::union($clients, $certain);
            $maybeClients = self::union($maybeClients, $maybe);
        }
        // The layout the config recommends: one class per upstream makes the calls, and the
        // job is handed it. Its calls are the job's (one level deep).
        foreach (self::collaborators($r) as $collaborator) {
            [$certain, $maybe] = self::clientsCalled(self::source($collaborator), $unchecked);
            $clients = self::union($clients, $certain);
            $maybeClients = self::union($maybeClients, $maybe);
        }
        $funnels = [];
        foreach ($middleware as $file) {
            $funnels = self::union($funnels, self::funnelsFromConfig($file, $unchecked));
        }
        $news = fn (string $class) => array_filter($middleware, fn (PhpSource $file) => $file->news($class) !== []) !== [];
        [$connection, $connectionAtRunTime] = self::connection($source, $defaults);

        return new self(
            $class,
            self::intOrNull($defaults['timeout'] ?? null),
            self::intOrNull($defaults['tries'] ?? null),
            self::intOrNull($defaults['maxExceptions'] ?? null),
            // Laravel 8's queue reads a `retryUntil()` method or a `$retryUntil` property (set
            // when dispatched, so one declared counts).
            $r->hasMethod('retryUntil') || $r->hasProperty('retryUntil'),
            $connection,
            $connectionAtRunTime,
            $kind,
            $values,
            $clients,
            $deadline,
            $funnels,
            $route,
            $routeDefault,
            $unchecked,
            $maybeClients,
            array_keys(array_filter([
                'ReleaseWhenUnavailable' => $news(self::QUEUE_RELEASE),
                'Queue\\Funnel' => $news(self::QUEUE_FUNNEL),
            ])),
            $r->hasMethod('release'),
        );
    }

    private static function source(\ReflectionClass $class): PhpSource
    {
        return new PhpSource((string) @file_get_contents((string) $class->getFileName()), $class);
    }

    /**
     * The file of the app's class above the job that declares the `$method` it inherits (none
     * when the job declares it, or it comes from the framework or a package).
     *
     * @return list<PhpSource>
     */
    private static function inheritedSource(\ReflectionClass $job, string $method): array
    {
        if (! $job->hasMethod($method)) {
            return [];
        }
        $declaring = $job->getMethod($method)->getDeclaringClass();
        $file = $declaring->getFileName();
        $app = $declaring->getName() !== $job->getName() && $declaring->isUserDefined() && $file !== false
            && ! str_contains($file, '/vendor/') && ! str_starts_with($declaring->getName(), 'Illuminate\\');

        return $app ? [self::source($declaring)] : [];
    }

    /**
     * The job's queue connection and whether it is known only at run time: what its code sets
     * (`$this->onConnection('x')`, usually in the constructor: a job using `Queueable` cannot
     * redeclare `$connection` with a value), else its `$connection` property's default. One
     * computed at run time, or more than one named, leaves the connection unknown. Another
     * object's `onConnection()` (a job this one dispatches) is not this job's.
     *
     * @param array<string, mixed> $defaults the class's default property values
     * @return array{0: ?string, 1: bool}
     */
    private static function connection(PhpSource $source, array $defaults): array
    {
        $named = [];
        $atRunTime = false;
        foreach ($source->calls('onConnection') as $call) {
            if ($call['object'] !== '$this') {
                continue;
            }
            $argument = PhpSource::argument($call['arguments'], 0, 'connection');
            [$known, $value] = $argument === null ? [false, null] : $source->value($argument);
            if ($known && is_string($value)) {
                $named[$value] = true;
            } else {
                $atRunTime = true;
            }
        }
        if ($named === [] && ! $atRunTime) {
            return [is_string($defaults['connection'] ?? null) ? $defaults['connection'] : null, false];
        }
        if (count($named) === 1 && ! $atRunTime) {
            return [(string) array_key_first($named), false];
        }

        return [null, true];
    }

    /**
     * The names of `new Funnel('x', ...)` (the queue middleware the file names, imported or
     * qualified) whose limit comes from config: no limit argument, or a null one.
     *
     * @return list<string>
     */
    private static function funnelsFromConfig(PhpSource $source, array &$unchecked): array
    {
        $names = [];
        foreach ($source->news(self::QUEUE_FUNNEL) as $arguments) {
            $limit = PhpSource::argument($arguments, 1, 'limit');
            if ($limit !== null && $source->value($limit) !== [true, null]) {
                continue;   // a limit of its own: config is not read
            }
            $name = PhpSource::argument($arguments, 0, 'name');
            [$known, $value] = $name === null ? [false, null] : $source->value($name);
            if ($known && is_string($value)) {
                $names[] = $value;
            } else {
                $unchecked[] = sprintf('Funnel name %s: known only at run time', $name['text'] ?? '(none)');
            }
        }
        $names = array_values(array_unique($names));
        sort($names);

        return $names;
    }

    /**
     * The classes of the app that the job is handed (`handle()`'s and the constructor's
     * parameter types) and whose calls it makes: those of the job's own root namespace
     * (`App\\Services\\ShippingGateway` for `App\\Jobs\\Quote`), not the framework's.
     *
     * @return list<\ReflectionClass>
     */
    private static function collaborators(\ReflectionClass $job): array
    {
        $root = strstr($job->getName(), '\\', true);
        if ($root === false) {
            return [];
        }
        $found = [];
        foreach (['handle', '__construct'] as $method) {
            if (! $job->hasMethod($method)) {
                continue;
            }
            foreach ($job->getMethod($method)->getParameters() as $parameter) {
                $type = $parameter->getType();
                $named = $type instanceof \ReflectionNamedType ? [$type] : ($type instanceof \ReflectionUnionType ? $type->getTypes() : []);
                foreach ($named as $t) {
                    $name = $t instanceof \ReflectionNamedType && ! $t->isBuiltin() ? $t->getName() : null;
                    if ($name === null || ! str_starts_with($name, "$root\\") || $name === $job->getName() || isset($found[$name])) {
                        continue;
                    }
                    if (class_exists($name) || interface_exists($name)) {
                        $class = new \ReflectionClass($name);
                        if ($class->isUserDefined() && $class->getFileName() !== false && ! $class->isInterface()) {
                            $found[$name] = $class;
                        }
                    }
                }
            }
        }

        return array_values($found);
    }

    /** @param list<string> $a @param list<string> $b @return list<string> sorted, each once */
    private static function union(array $a, array $b): array
    {
        $all = array_values(array_unique([...$a, ...$b]));
        sort($all);

        return $all;
    }

    /**
     * The client names the source calls: [those surely a client's (given to the facade's
     * `Resilient::client()`, to `->resilient()`, to `new Resilient\Client`), those maybe one's
     * (given to any other `client()` method: another library's, such as an SDK's
     * `->client('eu-west')`, or the manager's, injected)]. A name known only at run time is
     * listed as not checked when it is surely a client's.
     *
     * @return array{0: list<string>, 1: list<string>}
     */
    private static function clientsCalled(PhpSource $source, array &$unchecked): array
    {
        $certain = [];
        $maybe = [];
        foreach ($source->calls('client') as $call) {
            if (self::isFacade($call['call'])) {
                $certain[] = $call;
            } else {
                $maybe[] = $call;
            }
        }
        array_push($certain, ...$source->calls('resilient'));
        foreach ($source->news('Resilient\\Client') as $arguments) {
            $certain[] = ['call' => 'new Client()', 'arguments' => $arguments];
        }
        $unknownMaybe = [];

        return [self::names($source, $certain, $unchecked), self::names($source, $maybe, $unknownMaybe)];
    }

    /**
     * The names known without running the code that `$calls` give as their first argument
     * (`name:`), sorted; each one computed at run time is added to $unknown.
     *
     * @param list<array{call: string, arguments: list<array>}> $calls
     * @return list<string>
     */
    private static function names(PhpSource $source, array $calls, array &$unknown): array
    {
        $names = [];
        foreach ($calls as ['call' => $call, 'arguments' => $arguments]) {
            $name = PhpSource::argument($arguments, 0, 'name');
            if ($name === null) {
                continue;
            }
            [$known, $value] = $source->value($name);
            if ($known && is_string($value)) {
                $names[] = $value;
            } elseif (! $known) {
                $unknown[] = sprintf('client name %s (%s): known only at run time', $name['text'], $call);
            }
        }
        $names = array_values(array_unique($names));
        sort($names);

        return $names;
    }

    /** Whether a call as PhpSource::calls() writes it is the facade's (`Resilient::client()`, qualified or not). */
    private static function isFacade(string $call): bool
    {
        return (bool) preg_match('/(^|\\\\)Resilient::client\(\)$/', $call);
    }

    /**
     * The first WithinDeadline middleware the job makes: [seconds as in the constructor doc,
     * whether it is the route class, whether that one runs on its own 30 s default].
     *
     * @return array{0: false|null|float, 1: bool, 2: bool}
     */
    private static function withinDeadline(PhpSource $source, array &$unchecked): array
    {
        foreach ([self::QUEUE_DEADLINE => false, self::ROUTE_DEADLINE => true] as $class => $route) {
            foreach ($source->news($class) as $arguments) {
                $seconds = PhpSource::argument($arguments, 0, 'seconds');
                [$known, $value] = $seconds === null ? [true, null] : $source->value($seconds);
                if (! $known || ($value !== null && ! is_numeric($value))) {
                    $unchecked[] = sprintf('WithinDeadline seconds %s: known only at run time, HTTP time not checked', $seconds['text']);

                    return [INF, $route, false];
                }
                if ($value === null) {
                    return $route ? [self::ROUTE_DEFAULT, true, true] : [null, false, false];
                }

                return [(float) $value, $route, false];
            }
        }

        return [false, false, false];
    }

    /** @return array{0: 'none'|'fixed'|'jittered', 1: list<int|string>} */
    private static function backoff(\ReflectionClass $r, array $defaults): array
    {
        // The property first, as Laravel reads them (`$job->backoff ?? $job->backoff()`).
        if (isset($defaults['backoff'])) {
            return ['fixed', (array) $defaults['backoff']];
        }
        if (in_array(JitteredBackoff::class, self::traitsOf($r), true)) {
            return ['jittered', []];
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
