<?php

// Stubs for resilient

namespace Resilient {
    class Client {
        /**
         * `new Client(string $name, array $options = [])`. The name identifies the funnel and the
         * retry budget shared by every process of the host.
         *
         * Options are checked here: an unknown key or a bad value throws `\ValueError` naming
         * the option (`option 'funnel.limit': must be between 1 and 64, got 0`, the words of
         * `new Funnel(...)`), a wrong type `\TypeError` (`option 'timeout' must be of type
         * float, array given`). Numeric strings (`'0.5'`, `'4'`) are accepted as PHP accepts
         * them. See docs/errors.md.
         *
         * @param string $name
         * @param array|null $options
         */
        public function __construct(string $name, #[\SensitiveParameter] ?array $options = null) {}

        /**
         * @internal For `make bench`: `$n` funnel admissions, each released at once (`$op`
         * `'funnel'`), or `$n` originals each followed by a retry decision (`'budget'`), through the backend `$options`
         * choose (`backend`, `on_backend_error`, `funnel`, `budget`), with no HTTP. Returns how
         * many were admitted or allowed.
         *
         * @param string $name
         * @param array $options
         * @param string $op
         * @param mixed $n
         * @return int
         */
        public static function benchBackend(string $name, #[\SensitiveParameter] array $options, string $op, mixed $n): int {}

        /**
         * `delete(string $path, array $json = [], array $options = [])`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $json
         * @param array|null $options
         * @return mixed
         */
        public function delete(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `get(string $path, array $query = [], array $options = [])`. Options given as the query (an
         * array under `headers`, `query`, `json`, `form`, `multipart`, `cert`, `ssl_key`, `proxy`,
         * `form_params` or `auth`) are a `\ValueError`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $query
         * @param array|null $options
         * @return mixed
         */
        public function get(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $query = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `head(string $path, array $query = [], array $options = [])`. Options given as the query
         * are a `\ValueError`, as for `get()`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $query
         * @param array|null $options
         * @return mixed
         */
        public function head(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $query = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * The client's name (its funnel and budget name).
         *
         * @return string
         */
        public function name(): string {}

        /**
         * `patch(string $path, array $json = [], array $options = [])`. Retried only with an
         * `idempotency_key`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $json
         * @param array|null $options
         * @return mixed
         */
        public function patch(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `pool(array $requests, int $concurrency = 5)`: `$requests` is `key => [method, path,
         * options?]`; at most `$concurrency` in flight (a sliding window); returns `key =>
         * Response|Unavailable` (failures are values, not thrown). When more than half of 3 or
         * more first attempts failed, no call is retried (the upstream is in trouble); a retry
         * waits only until the first attempts still running cannot make it so. The requests run
         * on this thread between the callables' calls: a slow `on_attempt` holds every request of
         * the pool, whose timeouts keep running (keep it quick: queue what it records, write it
         * after); one that throws ends the pool there, its requests in flight cancelled and the
         * results so far lost (catch inside it).
         *
         * @param array $requests
         * @param mixed $concurrency
         * @return array
         */
        public function pool(#[\SensitiveParameter] array $requests, mixed $concurrency = null): array {}

        /**
         * `post(string $path, array $json = [], array $options = [])`: a non-empty `$json` is
         * sent as the JSON body. Retried only with an `idempotency_key`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $json
         * @param array|null $options
         * @return mixed
         */
        public function post(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `put(string $path, array $json = [], array $options = [])`.
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $path
         * @param array|null $json
         * @param array|null $options
         * @return mixed
         */
        public function put(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `request(string $method, string $path, array $options = [])` with options `query`,
         * `json`, `body`, `form`, `multipart`, `headers`, `idempotency_key`, `sink`, `timeout`,
         * `connect_timeout`, and the client's `verify`, `cert`, `ssl_key`, `proxy`,
         * `allow_redirects`, `decode_content` for this request (docs/client-options.md).
         * Returns a `Resilient\Response`; with the `fallback` option, the fallback's value when
         * the call is unavailable.
         *
         * @param string $method
         * @param string $path
         * @param array|null $options
         * @return mixed
         */
        public function request(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $options = null): mixed {}

        /**
         * `validateRequest(string $method, string $path, array $options = [])`: checks the call
         * `request()` would make, with the same exceptions for the same mistakes, and sends
         * nothing. For test doubles (the Laravel package's `Resilient::fake()`), so a call that
         * would throw in production throws under the fake too. Reads what `request()` reads
         * before sending (a multipart part's stream).
         *
         * @param string $method
         * @param string $path
         * @param array|null $options
         * @return void
         */
        public function validateRequest(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $options = null): void {}

        /**
         * `Client::validator(string $name, array $options = [])`: a client made from the same
         * options (refused as `new Client` refuses them) whose one use is `validateRequest()`. It
         * is bound to nothing shared: no entry for the name in the host's segment or on Redis, so a
         * test double (the Laravel package's `Resilient::fake()`) checks calls without filling the
         * test host's segment. Its sending methods throw `\LogicException`.
         *
         * @param string $name
         * @param array|null $options
         * @return \Resilient\Client
         */
        public static function validator(string $name, #[\SensitiveParameter] ?array $options = null): \Resilient\Client {}
    }

    /**
     * Where this process runs, and the web caps from php.ini (static; not
     * instantiable). Web = any SAPI but cli, phpdbg, embed, micro.
     */
    final class Context {
        /** Not for PHP code: `new` throws an `\Exception` ("You cannot instantiate this class
         * from PHP"), not the `\Error` of a private constructor. */
        private function __construct() {}

        /**
         * `$seconds` (at least 0.001), capped to `resilient.web_connect_timeout` when web.
         *
         * @param mixed $seconds
         * @return float
         */
        public static function connectTimeout(mixed $seconds): float {}

        /**
         * True under a web SAPI (fpm-fcgi, cgi-fcgi, apache2handler, cli-server,
         * litespeed, frankenphp, ...); false under cli, phpdbg, embed, micro; unless
         * `resilient.context` says `web` or `console` (Octane workers declare themselves web).
         *
         * @return bool
         */
        public static function isWeb(): bool {}

        /**
         * `$attempts` (1 to 100), capped to `resilient.web_max_attempts` when web.
         *
         * @param mixed $attempts
         * @return int
         */
        public static function maxAttempts(mixed $attempts): int {}

        /**
         * The SAPI name, as `PHP_SAPI`.
         *
         * @return string
         */
        public static function sapi(): string {}

        /**
         * `$seconds` (at least 0.001: a smaller timeout means none to a client counting in ms),
         * capped to `resilient.web_timeout` when web.
         *
         * @param mixed $seconds
         * @return float
         */
        public static function timeout(mixed $seconds): float {}
    }

    /**
     * One deadline shared by every call inside a scope (static; not
     * instantiable). Per process, each Fiber with its own scopes (starting with
     * those in force where it starts, each while its `within()` runs); cleared at
     * request start and end: nothing survives into the next FPM request.
     */
    final class Deadline {
        /** Not for PHP code: `new` throws an `\Exception` ("You cannot instantiate this class
         * from PHP"), not the `\Error` of a private constructor. */
        private function __construct() {}

        /**
         * `min($seconds, remaining())`, or `$seconds` when no deadline is set; never below
         * 0.001.
         *
         * @param mixed $seconds
         * @return float
         */
        public static function cap(mixed $seconds): float {}

        /**
         * Seconds left in the current deadline scope, or null outside any.
         *
         * @return float|null
         */
        public static function remaining(): ?float {}

        /**
         * Runs `$fn` with a deadline of `$seconds` from now (or the enclosing
         * deadline if that is earlier) and returns its result. The enclosing
         * deadline is restored on return and when `$fn` throws (the exception
         * propagates unchanged). `$seconds` >= 0 and finite, else `\ValueError`.
         * Nesting deeper than 1,000 scopes, or with less than 256 KB of C stack
         * left, throws `\Error` (runaway recursion would otherwise overflow the C
         * stack).
         *
         * @param mixed $seconds
         * @param callable $fn
         * @return mixed
         */
        public static function within(mixed $seconds, callable $fn): mixed {}
    }

    /**
     * A named concurrency limit shared by every PHP process of the user on the
     * host (FPM workers and CLI): at most `limit` leases held at once; web
     * callers may use all slots, background (CLI) callers only `limit - reserve`.
     * With `$share`, under contention each side keeps its part: while a background
     * caller was refused within the last 100 ms, web callers keep to the `reserve`
     * slots and background callers get the other `limit - reserve`. Fails fast
     * when full (no queueing). Throws `\ValueError` on a bad argument (the
     * message names it). When the segment cannot be used the funnel counts this
     * process only (degraded mode, see `degradedReason()`),
     * or throws `Resilient\SharedMemoryError` with `resilient.shm_required=1`.
     */
    class Funnel {
        /**
         * `new Funnel(string $name, int $limit, int $reserve = 0, ?float $lease = null,
         * bool $share = false)`. `$limit` 1..=64; `0 <= $reserve < $limit`; `$lease`
         * seconds, at least 1e-9 (a lease counts in whole ms, rounded up to 1) and at most a
         * year, default 20.0 (2 × the web timeout cap); `$share`
         * needs `$reserve >= 1`. Numbers may be given as numeric strings or integral
         * floats, as PHP's coercive mode allows.
         *
         * @param string $name
         * @param mixed $limit
         * @param mixed $reserve
         * @param mixed $lease
         * @param bool|null $share
         */
        public function __construct(string $name, mixed $limit, mixed $reserve = null, mixed $lease = null, ?bool $share = null) {}

        /**
         * Why this process's funnels, budgets and clients use process-local
         * guards (the degraded mode: the shared-memory segment is unusable, e.g.
         * owned by another user, readable by others, corrupt, or the file system
         * is full), or null when they share the segment. Opens the segment if this
         * process has not yet; throws `Resilient\SharedMemoryError` on a bad
         * `resilient.shm_*` setting, or when `resilient.shm_required` is on and
         * the segment is unusable.
         *
         * @return string|null
         */
        public static function degradedReason(): ?string {}

        /**
         * Leases held now across all processes (reclaims expired/dead ones first).
         *
         * @return int
         */
        public function inFlight(): int {}

        /**
         * True when this funnel counts only this process's leases: the shared
         * segment could not be used (degraded mode, see `degradedReason()`).
         *
         * @return bool
         */
        public function isDegraded(): bool {}

        /**
         * @internal For benchmarks: teaches the learned limit of `$name` (bounds 1..64) `$attempts`
         * answers of `$seconds` each, as the client's funnel guard does after every attempt (the
         * clock read, the in-flight load and the update). Returns the learned limit.
         *
         * @param string $name
         * @param mixed $attempts
         * @param mixed $seconds
         * @return float
         */
        public static function learnSynthetic(string $name, mixed $attempts, mixed $seconds = null): float {}

        /**
         * Lease length in seconds.
         *
         * @return float
         */
        public function lease(): float {}

        /**
         * @return int
         */
        public function limit(): int {}

        /**
         * @return string
         */
        public function name(): string {}

        /**
         * @return int
         */
        public function reserve(): int {}

        /**
         * Acquires a slot, calls `$fn`, releases the slot (also when `$fn` throws,
         * exits or hits a fatal error) and returns `$fn`'s result. When full:
         * returns `$fallback()` if given, else throws `Resilient\FunnelFull`.
         *
         * @param callable $fn
         * @param callable|null $fallback
         * @return mixed
         */
        public function run(callable $fn, ?callable $fallback = null): mixed {}

        /**
         * Whether the reserve is shared (`$share`): under contention web callers keep the
         * reserved slots and background callers the others.
         *
         * @return bool
         */
        public function share(): bool {}

        /**
         * `in_flight`, `limit`, `reserve`, `share`, `degraded`, and `learned`: what the name's
         * learned limit (`'limit' => 'auto'` on a client of this name) has learned, shared by
         * every process: `limit` (fractional, as stored for every process, within 1..64: each
         * client's cap is its whole slots clamped to its own `min`..`max`), `no_load_rtt_ms` (the
         * slowly tracked latency without queueing; 0 while not known yet), `rtt_ms` (the mean
         * latency of answers in the latest interval that had any: an outage of drops only keeps
         * it) and `intervals` (closed so far); null before a client of the
         * name made an attempt.
         *
         * @return array
         */
        public function stats(): array {}

        /**
         * A lease, or null when full. `$background` null = from the context
         * (CLI is background and may only use `limit - reserve` slots).
         *
         * @param bool|null $background
         * @return \Resilient\Lease|null
         */
        public function tryAcquire(?bool $background = null): ?\Resilient\Lease {}
    }

    /**
     * One held funnel slot (get one from `Funnel::tryAcquire()`; not
     * constructible from PHP). Released by `release()`, when the object is
     * destroyed, and at request end; a fatal error or `max_execution_time`
     * releases it as the error is raised, before the shutdown functions run (an
     * error an error handler takes does not). In a `pcntl_fork()` child an
     * inherited lease is neither released nor releasable: it belongs to the parent.
     */
    final class Lease {
        /** Not for PHP code: `new` throws an `\Exception` ("You cannot instantiate this class
         * from PHP"), not the `\Error` of a private constructor. */
        private function __construct() {}

        /**
         * The funnel's name.
         *
         * @return string
         */
        public function funnel(): string {}

        /**
         * True until released (locally, or by a fatal error that ended the code
         * holding it). A lease that expired is still reported held here;
         * `release()` then returns false.
         *
         * @return bool
         */
        public function isHeld(): bool {}

        /**
         * Gives the slot back. True if this call released it; false if it was
         * already released, expired and reclaimed, or belongs to a parent process
         * (the core never releases another process's lease).
         *
         * @return bool
         */
        public function release(): bool {}
    }

    /**
     * Host-wide metrics per upstream name (static; not instantiable).
     */
    final class Metrics {
        /** Not for PHP code: `new` throws an `\Exception` ("You cannot instantiate this class
         * from PHP"), not the `\Error` of a private constructor. */
        private function __construct() {}

        /**
         * The same metrics in Prometheus's text exposition format 0.0.4 (serve it with
         * `Content-Type: text/plain; version=0.0.4`). Labels: `upstream`, and `reason` or
         * `outcome`. Throws `Resilient\SharedMemoryError` as `snapshot()` does, and creates no
         * segment file either (before one exists: each family's headers only).
         *
         * @return string
         */
        public static function prometheus(): string {}

        /**
         * @internal For benchmarks and dashboard smoke tests: records `$calls` calls of one
         * successful attempt of `$seconds` under `$name`, through the same recorder the attempt
         * loop uses.
         *
         * @param string $name
         * @param mixed $calls
         * @param mixed $seconds
         * @return void
         */
        public static function recordSynthetic(string $name, mixed $calls, mixed $seconds = null): void {}

        /**
         * Zeroes the counters and histograms of `$name` (not the attempts in flight now, nor the
         * breaker's state). Returns false when the name has no metrics on this host, or no
         * segment file exists yet in its folder (it is not created: a segment made by an
         * operator's user would lock PHP-FPM's workers out). Throws `\ValueError` for an invalid name,
         * `Resilient\SharedMemoryError` as `snapshot()` does. An int is taken as its text (a
         * `snapshot()` key).
         *
         * @param string $name
         * @return bool
         */
        public static function reset(string $name): bool {}

        /**
         * The shared-memory segment file this process uses: `resilient.shm_path`, or the default
         * `/dev/shm/resilient-<uid>.v<layout>.shm` (the layout version in the name). Does not open
         * it. Throws `Resilient\SharedMemoryError` for a bad `resilient.shm_path`.
         *
         * @return string
         */
        public static function segmentPath(): string {}

        /**
         * Every upstream name with metrics on this host: `['shipping' => ['originals' => int,
         * 'attempts' => int, 'retries' => int (sent), 'retries_succeeded' => int,
         * 'retries_denied' => int, 'successes' => int, 'in_flight' => int, 'fallbacks' => int, 'backend_fallbacks' => int,
         * 'shed' => ['funnel' => int, 'budget' => int, 'deadline' => int, 'circuit' => int] (our
         * refusals), 'failures' => ['4xx' => int, '5xx' => int, 'timeout' => int, 'connection' =>
         * int, 'other' => int] (upstream failures per attempt), 'latency' => ['success' => h,
         * 'failure' => h], 'breaker' => ['state' => 'closed'|'open'|'half_open' (as this
         * host's last call found or left it: an open breaker past its `open_for` reads 'open' until
         * the next call, its probe), 'transitions' => ['closed' => int, 'open' => int, 'half_open' => int]],
         * 'learned' => null|['limit' =>
         * float, 'no_load_rtt_ms' => float, 'rtt_ms' => float, 'intervals' => int] (a funnel
         * `'limit' => 'auto'`, as `Funnel::stats()`), 'funnel_in_flight' => null|int (the slots of
         * the name's funnel held on this host now, holders killed mid-attempt not counted, which
         * `in_flight` keeps for good; null: no shared-memory funnel of the name used on this host,
         * as for a funnel on Redis, whose slots are kept there), 'funnel_limit' => null|int (the
         * fixed funnel limit of the latest client made with one under the name on this host)]]`, where `h` = `['buckets' =>
         * [1 => int, 2 => int, ..., 10000 => int, '+Inf' => int] (cumulative; keys: upper bounds
         * in ms), 'sum' => float (s), 'count' => int]`. A name that looks like an int is an int
         * key, as PHP makes it. Throws `Resilient\SharedMemoryError` when this process cannot use
         * the host's segment (the degraded mode, see `Funnel::degradedReason()`): its own counters
         * are never given as the host's. Before any process created the segment: `[]`, and the
         * file is not created (made by an operator's user, it would lock PHP-FPM's workers out).
         *
         * @return array
         */
        public static function snapshot(): array {}
    }

    final class Response {
        /** Not for PHP code: `new` throws an `\Exception` ("You cannot instantiate this class
         * from PHP"), not the `\Error` of a private constructor. */
        private function __construct() {}

        /**
         * What `var_dump()`, `print_r()` and Laravel's `dump()` show: the status, the URL without
         * its query (`url()` keeps it), the attempts and the time, the headers' names and the
         * body's length. No header's value and no body: a `Set-Cookie` or a token in an answer
         * would end up in the logs that dumps go to. `headers()` and `body()` give them.
         *
         * @return array
         */
        public function __debugInfo(): array {}

        /**
         * Attempts the call made, the first one included.
         *
         * @return int
         */
        public function attempts(): int {}

        /**
         * The body, bytes as received (a binary-safe PHP string). Copied once, straight into
         * the PHP string (bodies may be up to `max_body`).
         *
         * @return mixed
         */
        public function body(): mixed {}

        /**
         * Milliseconds from the call's start to this answer (sleeps between attempts included).
         *
         * @return float
         */
        public function elapsedMs(): float {}

        /**
         * `Response::fake(int $status = 200, string $body = '', array $headers = [])`: a response
         * built in PHP for tests (`attempts()` 0, `elapsedMs()` 0); headers are `name => value` or
         * `name => [values]`.
         *
         * @param mixed $status
         * @param mixed $body
         * @param array|null $headers
         * @return \Resilient\Response
         */
        public static function fake(mixed $status = null, #[\SensitiveParameter] mixed $body = null, #[\SensitiveParameter] ?array $headers = null): \Resilient\Response {}

        /**
         * A header's values joined with ", " (case-insensitive name), or null when absent. Bytes
         * as received (a value that is not UTF-8 is not rewritten).
         *
         * @param string $name
         * @return string|null
         */
        public function header(string $name): ?string {}

        /**
         * Every header: lower-case name => list of values (bytes as received).
         *
         * @return array
         */
        public function headers(): array {}

        /**
         * `json(?string $key = null, mixed $default = null)`: the body decoded as JSON into arrays
         * (`json_decode($body, true)`; null when not JSON). With `$key`, the value at that
         * dot-separated path (`'data.items.0.id'`), or `$default` when the path is not there (a
         * `Closure` is called for it), as Laravel's `Response::json($key, $default)` reads it
         * (without its `*` wildcard).
         *
         * @param string|null $key
         * @param mixed $default
         * @return mixed
         */
        public function json(?string $key = null, mixed $default = null): mixed {}

        /**
         * True for 2xx.
         *
         * @return bool
         */
        public function ok(): bool {}

        /**
         * Whether redirects were followed to get this answer (`allow_redirects`); `url()` is then
         * where they led.
         *
         * @return bool
         */
        public function redirected(): bool {}

        /**
         * The HTTP status.
         *
         * @return int
         */
        public function status(): int {}

        /**
         * The URL that gave this answer: the request's, or where its redirects led
         * (`allow_redirects`); without user-info or fragment. `null` for `Response::fake()`.
         *
         * @return string|null
         */
        public function url(): ?string {}
    }

    /**
     * A retry budget per name: per sliding window, retries may be at most
     * `floor + ratio × originals`, counted across every process of the host.
     * Throws `\ValueError` on a bad argument. When the segment cannot be used
     * the budget counts this process only (degraded mode, see
     * `Funnel::degradedReason()`), or throws `Resilient\SharedMemoryError`
     * with `resilient.shm_required=1`.
     */
    class RetryBudget {
        /**
         * `new RetryBudget(string $name, float $ratio = 0.1, int $floor = 5, float $window = 60.0)`.
         * `$ratio` 0..=1000 (retries earned per original), `$floor` 0..=1048575 (retries always
         * allowed per window), `$window` seconds, at least 0.02 (20 buckets of 1 ms) and at most
         * 600 (each of the 20 buckets counts up to 1048575 originals: 34952 a second at 600),
         * counted in whole milliseconds (a fraction of one is dropped; `stats()['window']` says
         * what is used). Numbers may be given as numeric strings (or an integral float for the floor), as
         * PHP's coercive mode allows; a bad one throws `\ValueError` or `\TypeError` naming it.
         *
         * @param string $name
         * @param mixed $ratio
         * @param mixed $floor
         * @param mixed $window
         */
        public function __construct(string $name, mixed $ratio = null, mixed $floor = null, mixed $window = null) {}

        /**
         * True when this budget counts only this process (degraded mode, see
         * `Funnel::degradedReason()`).
         *
         * @return bool
         */
        public function isDegraded(): bool {}

        /**
         * @return string
         */
        public function name(): string {}

        /**
         * Deposit: one original request (whatever its attempts).
         *
         * @return void
         */
        public function recordOriginal(): void {}

        /**
         * `['originals' => int, 'retries' => int, 'allowed' => float,
         * 'remaining' => float, 'window' => float (s), 'ratio' => float, 'floor' => int,
         * 'degraded' => bool]` for the current window (`degraded`: counting this
         * process only, see `Funnel::degradedReason()`; `remaining`: `allowed - retries`, at
         * most what the window's newest bucket can still count; `tryConsume()` grants while at
         * least 1 remains).
         *
         * @return array
         */
        public function stats(): array {}

        /**
         * Withdraw: true (and counted) when one retry may be sent now.
         *
         * @return bool
         */
        public function tryConsume(): bool {}
    }
}

// Exception classes: registered in MINIT with ClassBuilder (src/exceptions.rs),
// so `cargo php stubs` does not see them; this part is written by hand.
//
// php.ini (src/ini.rs), all PHP_INI_ALL; a bad value is refused (ini_set returns false):
//   resilient.shm_path            = ""     ; "" = /dev/shm/resilient-<uid>.v8.shm
//   resilient.shm_slots           = 256    ; names the segment holds (fixed when the file is created)
//   resilient.shm_required        = 0      ; 1: an unusable segment throws SharedMemoryError;
//                                          ; 0: process-local guards (said once in PHP's error log)
//   resilient.web_timeout         = 10     ; seconds, cap of Context::timeout() under a web SAPI
//   resilient.web_connect_timeout = 3      ; seconds, cap of Context::connectTimeout() under a web SAPI
//   resilient.web_max_attempts    = 1      ; cap of Context::maxAttempts() under a web SAPI
//   resilient.backend             = "shm"  ; or a redis://, rediss:// or unix:// URL (docs/redis.md)
//   resilient.context             = "auto" ; auto: the SAPI decides (web unless cli, phpdbg, embed,
//                                          ; micro); web or console says it outright

namespace Resilient {
    /**
     * No answer worth returning: our own refusal (deadline, funnel full,
     * budget spent, circuit open) or retryable upstream outcomes exhausted.
     * Constructible and subclassable from PHP.
     */
    class Unavailable extends \RuntimeException {
        /** The last attempt's response, if it got one (set by Resilient\Client). */
        protected $response = null;

        /**
         * The last attempt's Response, or null when that attempt got none (a timeout, a
         * refused connection: see failure()) or no attempt was sent; an answer an earlier
         * attempt got is not kept.
         *
         * @return \Resilient\Response|null
         */
        public function response(): ?\Resilient\Response {}

        /** Why the last attempt got no answer, if it got none (set by Resilient\Client). */
        protected $failure = null;

        /**
         * Why the last attempt got no answer: 'timeout' (its timeout or the
         * deadline ran out), 'connect' (refused, unreachable, DNS, connect
         * timeout), 'closed' (closed or reset before a complete response),
         * 'body' (the body could not be read), 'too_large' (over max_body),
         * 'tls', 'redirects', 'decode' (its Content-Encoding could not be
         * decoded), 'sink' (the sink file could not be written), 'request'
         * (the request could not be made, on our side: a multipart file gone
         * before a retry) or 'other'.
         * Null when it got an answer (getCode() and response() say which) or
         * no attempt was sent.
         *
         * @return string|null
         */
        public function failure(): ?string {}
    }

    /** The deadline left no time for the work. */
    class DeadlineExceeded extends Unavailable {}

    /** The funnel had no free slot (at once, or within the client's funnel 'wait'). */
    class FunnelFull extends Unavailable {}

    /** The retry budget is spent for this window. */
    class BudgetExhausted extends Unavailable {}

    /** The circuit breaker is open. */
    class CircuitOpen extends Unavailable {}

    /** Retryable upstream outcomes exhausted. Code = last HTTP status, 0 when the last attempt got no answer (failure() says why). */
    class UpstreamFailed extends Unavailable {}

    /**
     * The shared-memory segment cannot be used: corrupt, another layout
     * version, owned by another user, readable or writable by group or others
     * (the mode must be 600), a symlink or a file with more than one hard
     * link, or its table of names is full.
     * The message names the file and the problem.
     */
    class SharedMemoryError extends \RuntimeException {}
}
