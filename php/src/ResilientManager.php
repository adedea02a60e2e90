<?php

namespace Resilient\Laravel;

use Closure;
use InvalidArgumentException;
use Resilient\Client;
use Resilient\Deadline;
use Resilient\Funnel;
use Resilient\Laravel\Events\AttemptReporter;
use Resilient\Laravel\Testing\ClientFake;
use Resilient\Laravel\Testing\FakeClients;
use Resilient\RetryBudget;

/**
 * Builds the extension's objects from config, once per name per process.
 *
 * The objects themselves are cheap: their counters live in shared memory, so a fresh
 * object in every request sees the same funnel and budget as every other worker.
 *
 * Every client gets an `on_attempt` built here (an `AttemptMade` event and, with
 * `log_channel`, a log line per attempt), so config/resilient.php holds no closure and
 * `config:cache` works. Under `Resilient::fake()` clients are recording fakes instead.
 */
final class ResilientManager
{
    /** What `new Resilient\Funnel` takes after the name, by name. */
    public const FUNNEL_ARGUMENTS = ['limit', 'reserve', 'lease', 'share'];

    /** What `new Resilient\RetryBudget` takes after the name, by name. */
    public const BUDGET_ARGUMENTS = ['ratio', 'floor', 'window'];

    /** @var array<string, Client> */
    private array $clients = [];

    /** @var array<string, array> the entry ({@see clientConfig()}) each of $clients was built from, and where its attempts are reported */
    private array $builtFrom = [];

    private ?FakeClients $fake = null;

    /**
     * `defaults.context` as shown when it is no context the extension knows (see declareContext):
     * `'bogus'`, `bool true`; a string only up to its first character no word has (GivenText::shown()),
     * so a Redis URL set in RESILIENT_CONTEXT by mistake shows as `'redis…'`, not with its password.
     */
    private static ?string $refusedContext = null;

    /** The `resilient.context` value declareContext() set, to undo at the next app's boot. */
    private static ?string $declaredContext = null;

    /**
     * @param array|(Closure(): array) $config `resilient`'s config (clients, funnels, budgets, defaults, log_channel, events), or
     *        a closure reading it when asked, so a name added later (`config([...])` in a test) is found, and a client
     *        whose entry changed since it was built (a tenancy bootstrapper's `config([...])` between two jobs of one
     *        worker, Octane) is built again with the new one
     * @param (Closure(): \Illuminate\Contracts\Events\Dispatcher)|null $events resolved per attempt, so Event::fake() sees them
     * @param (Closure(string): \Psr\Log\LoggerInterface)|null $logs a log channel by name
     * @param string|null $extensionProblem why the loaded extension does not fit (ExtensionCheck), thrown at first use
     */
    public function __construct(
        #[\SensitiveParameter] private array|Closure $config,
        private ?Closure $events = null,
        private ?Closure $logs = null,
        private ?string $extensionProblem = null,
    ) {
    }

    /** The named client (a `ClientFake` under `Resilient::fake()`). */
    public function client(string $name): Client|ClientFake
    {
        if ($this->fake !== null) {
            $clients = $this->entries('clients');
            // A name neither configured nor scripted fails as in production (a misspelt name
            // must not pass a feature test), and so does an entry that is no array of options.
            $configured = array_key_exists($name, $clients);
            if (! $configured && ! $this->fake->scripts($name)) {
                $this->clientConfig($name);
            }
            $entry = $configured ? $this->clientConfig($name) : $this->entries('defaults');
            // A base URL that is no string is the checker's to refuse, at the call, in the
            // client's words.
            $base = is_string($entry['base_url'] ?? null) ? $entry['base_url'] : null;
            $fallback = $entry['fallback'] ?? null;

            // A stray call goes through the real client without its fallback: its Unavailable
            // comes back to the fake, which records it and applies the fallback itself, as it
            // does for a scripted one.
            $config = $configured ? fn () => $this->clientConfig($name) : null;

            return $this->fake->client($name, fn () => $this->realClient($name, withFallback: false), $base, $fallback, $config);
        }

        return $this->realClient($name);
    }

    /**
     * The named client without its `fallback` (or its fake, which then throws instead of
     * calling it): for `Http::resilient()`, whose callers expect an HTTP response or an
     * exception, never the fallback's value.
     */
    public function clientWithoutFallback(string $name): Client|ClientFake
    {
        if ($this->fake !== null) {
            return $this->client($name)->withoutFallback();
        }

        return $this->realClient($name, withFallback: false);
    }

    public function funnel(string $name): Funnel
    {
        $this->assertExtension();
        [$options, $key] = $this->funnelEntry($name);

        return self::buildFunnel($key, $name, $options);
    }

    /**
     * The constructor arguments of the funnel named $name (`funnels`, else the client's own);
     * throws InvalidArgumentException, naming the config key, when config gives none a Funnel
     * object can use: what `new Resilient\Funnel` would refuse at every run (an unknown key
     * such as a client funnel's `wait`, no limit, `reserve` not below `limit`). With the
     * extension loaded the values are checked by building the Funnel (its entry in the host's
     * segment is the one the funnel's first use makes); resilient:check asks it for every
     * job's Queue\Funnel.
     */
    public function funnelOptions(string $name): array
    {
        [$options, $key] = $this->funnelEntry($name);
        if (class_exists(Funnel::class, false)) {
            self::buildFunnel($key, $name, $options);
        }

        return $options;
    }

    /**
     * A funnel's options as `new Resilient\Funnel($name, ...$options)` takes them: an array of
     * limit, reserve, lease and share, a limit given and fixed; a null is "not set", as in a
     * client's entry. Throws InvalidArgumentException naming $key (`resilient.funnels.sap`).
     */
    public static function funnelArguments(string $key, mixed $options): array
    {
        $options = self::constructorArguments($key, $options, 'Funnel', self::FUNNEL_ARGUMENTS);
        if (! isset($options['limit'])) {
            throw new InvalidArgumentException("$key: 'limit' is required");
        }
        if ($options['limit'] === 'auto') {
            throw new InvalidArgumentException("$key: 'limit' => 'auto' is a client's learned limit, which only the client applies; a Funnel needs a fixed one");
        }

        return $options;
    }

    /** @return array{0: array, 1: string} the funnel's options and the config key they come from */
    private function funnelEntry(string $name): array
    {
        if (array_key_exists($name, $this->entries('funnels'))) {
            $key = "resilient.funnels.$name";

            return [self::funnelArguments($key, $this->entries('funnels')[$name]), $key];
        }
        $o = $this->fromClient($name, 'funnel', self::FUNNEL_ARGUMENTS, 'funnels');
        if (($o['limit'] ?? null) === 'auto') {
            throw new InvalidArgumentException(sprintf(
                "resilient: the funnel of client \"%s\" has a learned limit ('auto'), which only the client applies; "
                . 'a Funnel object (Resilient::funnel(), the queue middleware) needs a fixed one: add funnels.%s with a limit',
                $name, $name,
            ));
        }
        $key = "resilient.clients.$name.funnel";

        return [self::funnelArguments($key, $o), $key];
    }

    /** The Funnel, or the extension's refusal of its values as an InvalidArgumentException naming $key. */
    public static function buildFunnel(string $key, string $name, array $options): Funnel
    {
        return self::construct($key, fn () => new Funnel($name, ...$options));
    }

    /**
     * A budget from `budgets`, or the one a client of that name uses (its `budget` options).
     * Throws InvalidArgumentException naming the config key when its values cannot build one.
     */
    public function budget(string $name): RetryBudget
    {
        $this->assertExtension();
        // With both, the `budgets` entry, as funnel() takes the `funnels` one: it is the entry
        // written for this call (a job's budget, this host's for a client on Redis), and code
        // that counts in it must not move to other counters when a client of the name appears.
        // When the two differ, resilient:doctor warns and resilient:status shows both.
        if (array_key_exists($name, $this->entries('budgets'))) {
            $key = "resilient.budgets.$name";
            $options = $this->entries('budgets')[$name];
        } else {
            $key = "resilient.clients.$name.budget";
            $options = $this->fromClient($name, 'budget', self::BUDGET_ARGUMENTS, 'budgets');
        }

        return self::buildBudget($key, $name, self::budgetArguments($key, $options));
    }

    /**
     * A budget's options as `new Resilient\RetryBudget($name, ...$options)` takes them: an
     * array of ratio, floor and window; a null is "not set". Throws InvalidArgumentException
     * naming $key (`resilient.budgets.sap`).
     */
    public static function budgetArguments(string $key, mixed $options): array
    {
        return self::constructorArguments($key, $options, 'RetryBudget', self::BUDGET_ARGUMENTS);
    }

    /** The RetryBudget, or the extension's refusal of its values as an InvalidArgumentException naming $key. */
    public static function buildBudget(string $key, string $name, array $options): RetryBudget
    {
        return self::construct($key, fn () => new RetryBudget($name, ...$options));
    }

    /**
     * A config entry as the constructor of `$class` (`Funnel`, `RetryBudget`) takes its
     * arguments after the name: an array of $names, by name or position; a null is "not set".
     * Throws InvalidArgumentException naming $key.
     */
    private static function constructorArguments(string $key, mixed $options, string $class, array $names): array
    {
        if (! is_array($options)) {
            throw new InvalidArgumentException(sprintf(
                '%s: must be an array of %s options (%s), got %s', $key, $class, implode(', ', $names), get_debug_type($options),
            ));
        }
        $options = self::withoutNulls(self::byName($key, $options, $names));
        foreach (array_keys($options) as $option) {
            if (! in_array($option, $names, true)) {
                throw new InvalidArgumentException(sprintf(
                    "%s: unknown key '%s' (a %s takes %s)", $key, GivenText::shown((string) $option), $class, implode(', ', $names),
                ));
            }
        }

        return $options;
    }

    /**
     * What $make builds, or the extension's refusal of the values as an InvalidArgumentException
     * naming $key.
     *
     * @template T of object
     * @param Closure(): T $make
     * @return T
     */
    private static function construct(string $key, Closure $make): object
    {
        if (($problem = self::contextProblem()) !== null) {
            throw new InvalidArgumentException($problem);
        }
        try {
            return $make();
        } catch (\ValueError|\TypeError $e) {
            throw new InvalidArgumentException("$key: " . $e->getMessage(), 0, $e);
        }
    }

    /**
     * Declares `defaults.context` for the whole process through the `resilient.context`
     * setting (the service provider, at boot). A value that is no context the extension knows
     * leaves the setting as it was and is remembered: clients refuse it as their `context` option, and
     * every Funnel or RetryBudget built from config or by the queue middleware refuses it
     * too, rather than running as `auto`. Not thrown here: `package:discover` and
     * `config:cache` must still run.
     */
    public static function declareContext(#[\SensitiveParameter] mixed $context): void
    {
        self::$refusedContext = null;
        // An app booted before in this process (a test suite boots one per test) set its own:
        // undone, unless something else changed the setting since.
        if (self::$declaredContext !== null && ini_get('resilient.context') === self::$declaredContext) {
            ini_restore('resilient.context');
        }
        self::$declaredContext = null;
        if ($context === null || $context === '') {
            return;
        }
        // Not a string: `RESILIENT_CONTEXT=true` reaches config as a bool (env()), which clients
        // refuse as their `context` option; refused here alike, not taken as "not set".
        if (! is_string($context)) {
            self::$refusedContext = get_debug_type($context) . (is_scalar($context) ? ' ' . var_export($context, true) : '');

            return;
        }
        // Judged here, not by ini_set()'s result, which is false too for a setting an FPM pool
        // locked with php_admin_value (then the pool's value stands).
        if (! in_array(self::contextName($context), ['web', 'console', 'auto'], true)) {
            self::$refusedContext = "'" . GivenText::shown($context) . "'";

            return;
        }
        if (ini_set('resilient.context', $context) !== false) {
            self::$declaredContext = $context;
        }
    }

    /** A context as the extension reads one (`resilient.context`, a client's `context`): any case, spaces around. */
    public static function contextName(#[\SensitiveParameter] string $context): string
    {
        return strtolower(trim($context));
    }

    /** What is wrong with `defaults.context`, or null (see declareContext). */
    public static function contextProblem(): ?string
    {
        return self::$refusedContext === null ? null : sprintf(
            "resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got %s",
            self::$refusedContext,
        );
    }

    /** Runs $fn with every call inside sharing one deadline of $seconds (the earlier wins when nested). */
    public function within(float $seconds, callable $fn): mixed
    {
        $this->assertExtension();

        return Deadline::within($seconds, $fn);
    }

    /**
     * The options a client is built with, as config gives them (defaults merged, nulls
     * dropped; without the manager's `on_attempt`). A null, in the client's entry or in
     * `defaults`, at the top or inside a section (`'funnel' => ['reserve' => env('X')]`), means
     * "not set" (an unset `env()`): the default, or the extension's own, applies (no option
     * inside a section reads null otherwise than unset). An empty string is dropped from
     * `defaults` only.
     */
    public function clientConfig(string $name): array
    {
        $options = $this->section('clients', $name);
        foreach ($this->entries('defaults') as $key => $value) {
            if ($value !== null && $value !== '' && ! isset($options[$key])) {
                $options[$key] = $value;
            }
        }

        return self::withoutNulls($options);
    }

    /**
     * Every configured client's options as it runs ({@see clientConfig()}), by name. An entry
     * that is not an array throws; with $problems given, it is left out and its message added
     * there instead (for the artisan commands, which report it beside everything else).
     *
     * @param list<string>|null $problems
     */
    public function clientConfigs(?array &$problems = null): array
    {
        $collect = func_num_args() > 0;
        $problems = $collect ? ($problems ?? []) : null;
        $clients = [];
        try {
            $names = array_keys($this->entries('clients'));
        } catch (InvalidArgumentException $e) {
            if (! $collect) {
                throw $e;
            }
            $problems[] = $e->getMessage();
            $names = [];
        }
        foreach ($names as $name) {
            try {
                $clients[$name] = $this->clientConfig((string) $name);
            } catch (InvalidArgumentException $e) {
                if (! $collect) {
                    throw $e;
                }
                $problems[] = $e->getMessage();
            }
        }

        return $clients;
    }

    /**
     * What the named real client's every use throws because of its config (the client's own
     * `\ValueError` / `\TypeError` words, prefixed with its entry), or null when it builds:
     * for resilient:status, which reports it instead of "ok".
     */
    public function clientProblem(string $name): ?string
    {
        try {
            $this->realClient($name);

            return null;
        } catch (\ValueError|\TypeError|InvalidArgumentException $e) {
            return $e->getMessage();
        }
    }

    /**
     * Swaps named clients for recording fakes answering $scripts (name => list of
     * `Resilient\Response` or `\Throwable`, one per call; a single one repeats; a closure
     * answers each call). Without $scripts every name in `clients` answers 200 with an empty body;
     * a name neither configured nor scripted throws, as in production.
     */
    public function fake(?array $scripts = null): FakeClients
    {
        $this->fake ??= new FakeClients();
        $this->fake->script($scripts);

        return $this->fake;
    }

    /** The recording fakes, or null when not faking. */
    public function fakes(): ?FakeClients
    {
        return $this->fake;
    }

    /** A call to an unscripted name throws, as one past the end of a list always does (fakes on if needed). */
    public function preventStrayRequests(bool $prevent = true): FakeClients
    {
        return ($this->fake ??= new FakeClients())->preventStrayRequests($prevent);
    }

    public function assertSent(callable $callback): void
    {
        $this->recorder()->assertSent($callback);
    }

    public function assertNotSent(callable $callback): void
    {
        $this->recorder()->assertNotSent($callback);
    }

    public function assertSentCount(int $count): void
    {
        $this->recorder()->assertSentCount($count);
    }

    public function assertNothingSent(): void
    {
        $this->recorder()->assertNothingSent();
    }

    /** @return list<array{0: \Resilient\Laravel\Testing\RecordedRequest, 1: mixed}> */
    public function recorded(?callable $callback = null): array
    {
        return $this->recorder()->recorded($callback);
    }

    private function recorder(): FakeClients
    {
        return $this->fake ?? throw new \LogicException('resilient: call Resilient::fake() before asserting on sent requests');
    }

    private function realClient(string $name, bool $withFallback = true): Client
    {
        $key = $withFallback ? $name : $name . "\0without fallback";
        // Where its attempts are reported, read at every call as the entry is: a test or a
        // tenancy bootstrapper that turns events or the log channel off takes effect.
        $reporting = [(bool) ($this->config()['events'] ?? true), $this->config()['log_channel'] ?? null];
        if (isset($this->clients[$key])) {
            // The entry as it is now: one that changed since (another tenant's URL and key)
            // must not be sent with the options of before.
            $options = $this->clientConfig($name);
            if ([$options, $reporting] === $this->builtFrom[$key]) {
                return $this->clients[$key];
            }
        } else {
            $this->assertExtension();
            $options = $this->clientConfig($name);
        }
        $builtFrom = [$options, $reporting];
        if (! $withFallback) {
            unset($options['fallback']);
        }
        if (isset($options['on_attempt']) && ! is_callable($options['on_attempt'])) {
            throw new InvalidArgumentException(sprintf(
                'resilient: clients.%s.on_attempt must be a callable config:cache can write ([Class::class, \'method\'] or a function name); '
                . 'for logs and events use resilient.log_channel and the AttemptMade event instead',
                $name,
            ));
        }
        $reporter = new AttemptReporter(
            ($this->config()['events'] ?? true) ? $this->events : null,
            $this->logger(),
            $options['on_attempt'] ?? null,
        );
        unset($options['on_attempt']);
        if (! $reporter->isIdle()) {
            $options['on_attempt'] = $reporter;
        }

        try {
            $client = new Client($name, $options);
            $this->builtFrom[$key] = $builtFrom;

            return $this->clients[$key] = $client;
        } catch (\ValueError $e) {
            throw new \ValueError($this->refusedIn($name, $e->getMessage()) . $e->getMessage(), 0, $e);
        } catch (\TypeError $e) {
            // The extension's message names the option; this names the entry that holds it.
            throw new \TypeError($this->refusedIn($name, $e->getMessage()) . $e->getMessage(), 0, $e);
        }
    }

    /**
     * The config key holding the option a client's build refused (`option 'timeout' ...`):
     * the client's entry, or `defaults` when the entry does not set it (an .env value).
     */
    private function refusedIn(string $name, string $message): string
    {
        if (preg_match("/^option '([^'.]+)/", $message, $m) === 1
            && ! isset($this->section('clients', $name)[$m[1]])
            && isset($this->entries('defaults')[$m[1]])) {
            return "resilient.defaults.{$m[1]} (taken by client $name): ";
        }

        return "resilient.clients.$name: ";
    }

    /** @return (Closure(): \Psr\Log\LoggerInterface)|null */
    private function logger(): ?Closure
    {
        $channel = $this->config()['log_channel'] ?? null;
        if (($problem = Console\ConfigKeys::logChannelProblem($channel)) !== null) {
            throw new InvalidArgumentException($problem);
        }
        if ($channel === null || $channel === '' || $channel === false || $this->logs === null) {
            return null;
        }
        $logs = $this->logs;
        $logger = null;

        return static function () use ($logs, $channel, &$logger) {
            return $logger ??= $logs((string) $channel);
        };
    }

    /**
     * Whether the client named $name keeps its funnel, budget and breaker on Redis (its
     * `backend` option, else the `resilient.backend` ini setting) rather than in this host's
     * shared memory, which `Resilient\Funnel` and `Resilient\RetryBudget` objects read.
     */
    public function onRedis(string $name): bool
    {
        $backend = $this->clientConfig($name)['backend'] ?? ini_get('resilient.backend');

        return is_string($backend) && self::isRedisUrl($backend);
    }

    /** Whether a `backend` value (the option, or `resilient.backend`) names Redis, as the extension reads it (trimmed). */
    public static function isRedisUrl(#[\SensitiveParameter] string $backend): bool
    {
        // Anything else is shm or refused by the client; trimmed as the client trims it.
        return preg_match('#^(redis|rediss|unix)://#i', GivenText::trimmed($backend)) === 1;
    }

    /** The `funnel` or `budget` options of the client named $name, as constructor arguments. */
    private function fromClient(string $name, string $key, array $arguments, string $section): array
    {
        if (! array_key_exists($name, $this->entries('clients'))) {
            return $this->section($section, $name);
        }
        if ($this->onRedis($name)) {
            // Never the URL: it may hold a password.
            throw new InvalidArgumentException(sprintf(
                'resilient: client "%s" keeps its %s on Redis (its backend), and Resilient::%s() reads this host\'s shared memory only: '
                . 'its counters would not be the client\'s; add %s.%s for a %s of this host',
                $name, $key, $key, $section, $name, $key,
            ));
        }
        $options = $this->clientConfig($name);
        $given = $options[$key] ?? ($key === 'budget' ? [] : null);
        if (! is_array($given)) {
            throw new InvalidArgumentException(sprintf(
                'resilient: client "%s" has no %s in config/resilient.php', $name, $key,
            ));
        }

        return array_intersect_key($given, array_flip($arguments));
    }

    /**
     * The names a section's objects can be built for: its entries, and for `funnels` and
     * `budgets` the clients with one of their own (a funnel with a fixed limit; a budget unless
     * off), which Resilient::funnel() / budget() and Queue\Funnel take too.
     *
     * @return list<string>
     */
    private function known(string $section): array
    {
        $names = array_map('strval', array_keys($this->entries($section)));
        $key = ['funnels' => 'funnel', 'budgets' => 'budget'][$section] ?? null;
        foreach ($key === null ? [] : $this->entries('clients') as $client => $entry) {
            $own = is_array($entry) ? ($entry[$key] ?? null) : null;
            if ($key === 'budget' ? $own !== false : is_array($own) && ($own['limit'] ?? null) !== 'auto') {
                $names[] = (string) $client;
            }
        }

        return array_values(array_unique($names));
    }

    private function config(): array
    {
        return $this->config instanceof Closure ? (array) ($this->config)() : $this->config;
    }

    private function assertExtension(): void
    {
        if ($this->extensionProblem !== null) {
            throw new \RuntimeException($this->extensionProblem);
        }
    }

    /**
     * A top-level section of the config (`clients`, `funnels`, `budgets`, `defaults`); null or
     * absent is empty. Throws InvalidArgumentException naming it when it is not an array.
     */
    public static function sectionOf(#[\SensitiveParameter] array $config, string $section): array
    {
        $all = $config[$section] ?? [];
        if (! is_array($all)) {
            throw new InvalidArgumentException(sprintf(
                'resilient.%s: must be an array of entries by name, got %s', $section, get_debug_type($all),
            ));
        }

        return $all;
    }

    private function entries(string $section): array
    {
        return self::sectionOf($this->config(), $section);
    }

    private function section(string $section, string $name): array
    {
        $all = $this->entries($section);
        if (! array_key_exists($name, $all)) {
            throw new InvalidArgumentException(sprintf(
                'resilient: no %s named "%s" in config/resilient.php (known: %s)',
                rtrim($section, 's'),
                $name,
                implode(', ', $this->known($section)) ?: 'none',
            ));
        }
        if (! is_array($all[$name])) {
            throw new InvalidArgumentException(sprintf(
                'resilient.%s.%s: must be an array of %s options, got %s', $section, $name, rtrim($section, 's'), get_debug_type($all[$name]),
            ));
        }

        return $all[$name];
    }

    /**
     * $options with the ones given by position (`[15, 3]`, `[0.1, 'window' => 30]`) named as
     * the constructor reads them (`new Resilient\Funnel($name, 15, 3)`); one given both ways
     * is refused, as PHP refuses it.
     */
    private static function byName(string $key, array $options, array $names): array
    {
        $named = [];
        foreach ($options as $option => $value) {
            if (is_int($option) && isset($names[$option])) {
                $option = $names[$option];
            }
            if (array_key_exists($option, $named)) {
                throw new InvalidArgumentException("$key: '$option' is given twice (by position and by name)");
            }
            $named[$option] = $value;
        }

        return $named;
    }

    /** $options without its nulls, at every depth: a null (an unset `env()`) is "not set". */
    private static function withoutNulls(#[\SensitiveParameter] array $options): array
    {
        foreach ($options as $key => $value) {
            if ($value === null) {
                unset($options[$key]);
            } elseif (is_array($value)) {
                $options[$key] = self::withoutNulls($value);
            }
        }

        return $options;
    }
}
