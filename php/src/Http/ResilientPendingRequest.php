<?php

namespace Resilient\Laravel\Http;

use Closure;
use GuzzleHttp\Cookie\CookieJarInterface;
use GuzzleHttp\HandlerStack;
use GuzzleHttp\Middleware;
use GuzzleHttp\Promise\Create;
use Illuminate\Http\Client\PendingRequest;
use LogicException;
use Psr\Http\Message\RequestInterface;
use Resilient\Laravel\ResilientManager;
use Resilient\Laravel\Testing\CallValidator;

/**
 * What `Http::resilient('shipping')` returns: Laravel's PendingRequest (its events, its
 * `Http::fake()` stubs, its middleware) with the named `Resilient\Client` as the Guzzle handler.
 *
 * Differences from Laravel's own:
 * - `->retry()` is refused: the client owns the retries (one retry owner), and Laravel's
 *   loop around it would multiply attempts (3 × 3 = 9 against a failing upstream); only
 *   `retry(1)` (Laravel's one try, no retry) is accepted, before or after `resilient()`;
 * - Guzzle's redirect middleware is left out: redirects are followed by the client inside
 *   one attempt (`allow_redirects`), so a redirect is never a second call with its own
 *   funnel slot and budget deposit (under Http::fake() it follows faked redirects, by the
 *   client's precedence);
 * - `->async()`, `->pool()` and Http::pool() are refused: a client call is synchronous;
 * - a `base_url` with a query keeps it, in front of the request's, as the client joins it
 *   (Laravel 8 joins the strings, `/api?v=2/items`); events and Http::fake() see the URL
 *   without it;
 * - cookies the last hop of a redirect set are filed under that hop's host; those an
 *   intermediate redirect response set are not sent on the next hops.
 */
class ResilientPendingRequest extends PendingRequest
{
    protected string $resilientName = '';

    protected ?ResilientManager $resilientManager = null;

    /** The query of the `base_url` the send() in progress joins to (see send()). */
    protected string $resilientBaseQuery = '';

    /** Whether the send() in progress has a `query` option (its keys replace the base query's). */
    protected bool $resilientQueryGiven = false;

    /** @var list<string> option names given to the send() in progress: the request's own too */
    protected array $resilientSendOptions = [];

    /** The client's configured headers and user agent (see withConfiguredHeaders()). */
    protected array $resilientHeaders = [];

    /** The base URL from() filled in from the client's `base_url` (a later resilient() replaces it). */
    protected ?string $resilientConfiguredBaseUrl = null;

    /** The client's `allow_redirects` (null: its config says nothing), for faked redirects (buildClient()). */
    protected mixed $resilientRedirects = null;

    /** Under Http::fake(): the Resilient handler's checks, run before a stub answers (buildStubHandler()). */
    protected ?Closure $resilientCheck = null;

    /** A copy of $request (its options, headers, callbacks, stubs) sending through client $name. */
    public static function from(PendingRequest $request, string $name, ResilientManager $manager): static
    {
        if (static::retries($request->tries ?? 1)) {
            throw static::retryRefused($name);
        }
        if ($request->async ?? false) {
            throw static::asyncRefused($name);
        }
        $copy = (new \ReflectionClass(static::class))->newInstanceWithoutConstructor();
        foreach (get_object_vars($request) as $property => $value) {
            $copy->{$property} = $value;
        }
        $copy->resilientName = $name;
        $copy->resilientManager = $manager;
        // Events, Telescope and Http::fake() URL patterns see the real URL, not a bare path.
        // A name not in the config fails here, as it would at the call, also under
        // Http::fake() (which would otherwise answer a misspelt name); only a name that
        // Resilient::fake() scripts may have no config.
        try {
            $config = $manager->clientConfig($name);
        } catch (\InvalidArgumentException $e) {
            if (! ($manager->fakes()?->scripts($name) ?? false)) {
                throw $e;
            }
            $config = [];
        }
        // The app's base URL stays; one the previous resilient() filled in goes with its client.
        $base = (string) ($copy->baseUrl ?? '');
        $configured = $config['base_url'] ?? '';
        if (! is_string($configured)) {
            // The client's own TypeError, as each call would give it (not PHP's "Array to
            // string conversion" inside Laravel); without the extension, the call says so.
            CallValidator::for($name, $config);
            $configured = '';
        }
        if ($base === '' || $base === $copy->resilientConfiguredBaseUrl) {
            $copy->baseUrl = $configured;
            $copy->resilientConfiguredBaseUrl = $copy->baseUrl;
        }
        $copy->resilientHeaders = ConfiguredHeaders::of($config);
        $copy->resilientRedirects = $config['allow_redirects'] ?? null;

        return $copy;
    }

    /**
     * Under Http::fake() the client does not run: the request Laravel records gets the headers
     * it would add (a request's own header wins, as there; a body's type wins over a configured
     * Content-Type, as there), so header assertions test what the upstream gets. Not otherwise:
     * the client adds them itself, out of sight of Laravel's events (they may hold an API key).
     *
     * @param array<string, mixed> $set the request's own headers
     * @param bool $body whether the request has a body (Guzzle then sets its type)
     * @return array<string, mixed> $set and the configured headers it lacks
     */
    private function withConfiguredHeaders(#[\SensitiveParameter] array $set, bool $body): array
    {
        $taken = array_map(fn ($name) => strtolower((string) $name), array_keys($set));
        if ($body) {
            $taken[] = 'content-type';
        }
        foreach ($this->resilientHeaders as $name => $value) {
            if (! in_array(strtolower((string) $name), $taken, true)) {
                $set[(string) $name] = $value;
            }
        }

        return $set;
    }

    /**
     * Refused unless it asks for one try: the named client retries (max_attempts, backoff,
     * retry_on in config/resilient.php).
     */
    public function retry($times, $sleep = 0, ?callable $when = null, $throw = true)
    {
        if (static::retries($times)) {
            throw static::retryRefused($this->resilientName);
        }

        return parent::retry(...func_get_args());
    }

    /**
     * Refused, as inside Http::pool(): a client call is synchronous, and Laravel's promise takes
     * only Guzzle's exceptions, so a refusal (FunnelFull) would come out as a TypeError.
     * `async(false)` is the usual call.
     */
    public function async(bool $async = true)
    {
        if ($async) {
            throw static::asyncRefused($this->resilientName);
        }

        return parent::async($async);
    }

    /**
     * Refused, as `->async()`: Laravel's pool builds its requests from the plain factory, so
     * they would go out without this client (its base URL, headers, funnel, budget, retries).
     * `$more`: what later Laravels take after the callback (12: `$concurrency`).
     */
    public function pool(callable $callback, mixed ...$more)
    {
        throw static::asyncRefused($this->resilientName);
    }

    /**
     * An absolute URL is sent as given: Laravel 8 joins even those to `baseUrl`, which this
     * class fills in from the client's `base_url` (https://host/https://host/quote).
     * `$options` count as the request's own, as withOptions() ones do (GuzzleOptions: what
     * the request set wins over the client's config).
     */
    public function send(string $method, #[\SensitiveParameter] string $url, #[\SensitiveParameter] array $options = [])
    {
        $base = $this->baseUrl;
        if (preg_match('#^https?://#i', $url) === 1) {
            $this->baseUrl = '';
        } elseif (($at = strpos((string) $base, '?')) !== false) {
            // Joined to the base's path; buildClient() puts the base's query back in front.
            [$this->baseUrl, $this->resilientBaseQuery] = [substr($base, 0, $at), substr($base, $at + 1)];
            // Guzzle's `query` option takes the place of the path's query: its keys replace
            // the base's, as the client's `$query` does; a path's own query is kept beside it.
            $this->resilientQueryGiven = array_key_exists('query', $options) || array_key_exists('query', $this->options);
        }
        $this->resilientSendOptions = array_keys($options);
        $headers = $this->options['headers'] ?? null;
        if ($this->faked()) {
            $body = array_intersect_key($options + $this->options, array_flip(['body', 'json', 'form_params', 'multipart'])) !== []
                || ($this->pendingFiles ?? []) !== [];
            $this->options['headers'] = $this->withConfiguredHeaders((array) $headers, $body);
        }
        try {
            return parent::send($method, $url, $options);
        } finally {
            $this->options['headers'] = $headers;
            if ($headers === null) {
                unset($this->options['headers']);
            }
            $this->baseUrl = $base;
            $this->resilientSendOptions = [];
            $this->resilientBaseQuery = '';
            $this->resilientQueryGiven = false;
        }
    }

    /**
     * `attach()` / `multipart`: the parts also go to the handler as they are (Guzzle encodes
     * them into a body before any handler runs), so the client sends them as its own
     * `multipart`, a file streamed from disk rather than read whole into memory. Not with a
     * middleware of the app's (`withMiddleware()`): it may have read or signed Guzzle's bytes,
     * which are then sent as they are.
     */
    protected function sendRequest(string $method, #[\SensitiveParameter] string $url, #[\SensitiveParameter] array $options = [])
    {
        if (is_array($options['multipart'] ?? null) && collect($this->middleware)->isEmpty()) {
            $options[ResilientHandler::PARTS] = $options['multipart'];
        }

        return parent::sendRequest($method, $url, $options);
    }

    /**
     * Guzzle's stack without its redirect middleware (but under Http::fake()), the Resilient
     * handler at the bottom.
     */
    public function buildClient()
    {
        $explicit = [...array_keys($this->getOptions()), ...$this->resilientSendOptions];
        $stack = new HandlerStack($handler = new ResilientHandler(
            $this->resilientManager,
            $this->resilientName,
            $explicit,
            // What a fresh PendingRequest holds (Laravel 8: `http_errors`; 9+ adds `timeout` 30
            // and `connect_timeout` 10, 11+ `crypto_method`): Laravel's defaults, not the
            // caller's wishes, so they never override the client's config (GuzzleOptions).
            (new PendingRequest())->getOptions(),
        ));
        $stack->push(Middleware::httpErrors(), 'http_errors');
        // Under Http::fake() the fake answers before the client runs: a faked redirect is
        // followed here, as Guzzle follows it for plain Http:: (the client follows real ones),
        // by the rule the client would follow it by (GuzzleOptions: the request's setting, else
        // the client's, else Laravel's default, which Guzzle has already put in the options).
        $this->resilientCheck = $this->faked() ? $handler->check(...) : null;
        if ($this->faked()) {
            $configured = $this->resilientRedirects;
            if (! in_array('allow_redirects', $explicit, true) && (is_bool($configured) || is_array($configured))) {
                $stack->push(static fn (callable $next) => static fn ($request, array $options) => $next($request, ['allow_redirects' => $configured] + $options), 'resilient_allow_redirects');
            }
            $stack->push(Middleware::redirect(), 'allow_redirects');
        }
        // The jar's cookies for the request; the handler files the answer's (after redirects).
        $stack->push(static fn (callable $next) => static function (#[\SensitiveParameter] $request, #[\SensitiveParameter] array $options) use ($next) {
            $jar = $options['cookies'] ?? null;
            if (! empty($jar) && ! $jar instanceof CookieJarInterface) {
                throw new \InvalidArgumentException('cookies must be an instance of GuzzleHttp\Cookie\CookieJarInterface');
            }

            return $next($jar instanceof CookieJarInterface ? $jar->withCookieHeader($request) : $request, $options);
        }, 'cookies');
        $stack->push(Middleware::prepareBody(), 'prepare_body');
        $this->pushHandlers($stack);
        if ($this->resilientBaseQuery !== '') {
            // Before every other layer (Laravel's RequestSending, its fakes, the app's own
            // middleware), so each sees the URL sent and effectiveUri() is that URL.
            [$base, $replaces] = [$this->resilientBaseQuery, $this->resilientQueryGiven];
            $stack->unshift(Middleware::mapRequest(static fn (#[\SensitiveParameter] RequestInterface $request) => $request->withUri(
                $request->getUri()->withQuery(self::withBaseQuery($base, $request->getUri()->getQuery(), $replaces)),
            )), 'resilient_base_query');
        }

        return $this->createClient($stack);
    }

    /**
     * The base URL's query (which Laravel's join and Guzzle's `query` dropped: send()) in
     * front of the request's, as the client joins them: a key of a `query` option
     * ($replaces) replaces that key's pairs there (by name before any `[`, so `filter`
     * replaces `filter[...]`); a path's own query is put beside it.
     */
    private static function withBaseQuery(#[\SensitiveParameter] string $base, #[\SensitiveParameter] string $query, bool $replaces): string
    {
        $name = static fn (string $pair): string => explode('[', urldecode(explode('=', $pair, 2)[0]), 2)[0];
        $given = $query === '' || ! $replaces ? [] : array_map($name, explode('&', $query));
        $kept = array_filter(explode('&', $base), static fn (string $pair) => ! in_array($name($pair), $given, true));

        return implode('&', [...$kept, ...($query === '' ? [] : [$query])]);
    }

    /**
     * Laravel's stub handler, which under Http::fake() answers before the Resilient handler
     * runs, behind the handler's checks (ResilientHandler::check()): a call production refuses
     * (an option this bridge or the client does not take, a bad value) is rejected with the
     * same exception, and Laravel records nothing, as for a misspelt client name.
     */
    public function buildStubHandler()
    {
        $stub = parent::buildStubHandler();
        $check = $this->resilientCheck;
        if ($check === null) {
            return $stub;
        }

        return static fn (callable $handler) => static function (#[\SensitiveParameter] $request, #[\SensitiveParameter] array $options) use ($stub, $check, $handler) {
            try {
                $check($request, $options);
            } catch (\Throwable $e) {
                return Create::rejectionFor($e);
            }

            return $stub($handler)($request, $options);
        };
    }

    /** True when Laravel's `tries` asks for retries: more than one try, or (10+) a list of waits. */
    /** Under Http::fake(): stubs answer before the client runs. */
    private function faked(): bool
    {
        $stubs = $this->stubCallbacks ?? null;

        return $stubs instanceof \Illuminate\Support\Collection && $stubs->isNotEmpty();
    }

    protected static function retries(mixed $tries): bool
    {
        return is_array($tries) ? $tries !== [] : (int) $tries > 1;
    }

    protected static function asyncRefused(string $name): LogicException
    {
        return new LogicException(sprintf(
            "resilient: Http::resilient('%s') inside Http::pool(), with ->pool() or with ->async() is not supported: a client call is synchronous, "
            . "so the pool would run them one by one. Use Resilient::client('%s')->pool([...]) instead "
            . '(a sliding window, each request under the funnel and the budget).',
            $name, $name,
        ));
    }

    protected static function retryRefused(string $name): LogicException
    {
        return new LogicException(sprintf(
            "resilient: ->retry() is refused on Http::resilient('%s'): the Resilient\\Client '%s' owns the retries "
            . '(one retry owner: a retry loop around a client that retries multiplies attempts, 3 × 3 = 9 against a '
            . "failing upstream). Set max_attempts, backoff and retry_on for '%s' in config/resilient.php instead.",
            $name, $name, $name,
        ));
    }
}
