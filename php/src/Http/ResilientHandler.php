<?php

namespace Resilient\Laravel\Http;

use GuzzleHttp\Cookie\CookieJarInterface;
use GuzzleHttp\Exception\ConnectException;
use GuzzleHttp\Exception\RequestException;
use GuzzleHttp\Exception\TooManyRedirectsException;
use GuzzleHttp\Exception\TransferException;
use GuzzleHttp\Promise\Create;
use GuzzleHttp\Promise\PromiseInterface;
use GuzzleHttp\Psr7\MultipartStream;
use GuzzleHttp\Psr7\Response as PsrResponse;
use GuzzleHttp\Psr7\Uri;
use GuzzleHttp\Psr7\Utils;
use GuzzleHttp\TransferStats;
use Psr\Http\Message\RequestInterface;
use Psr\Http\Message\StreamInterface;
use Resilient\Laravel\ResilientManager;
use Resilient\Laravel\Testing\CallValidator;
use Resilient\Response;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * A Guzzle handler that sends each PSR-7 request through the named `Resilient\Client` (or its
 * fake under `Resilient::fake()`): the client owns timeouts, the deadline, the funnel, the
 * retry budget and the retries, so one Guzzle request is one client call, however many
 * attempts it takes.
 *
 * Outcomes, in Guzzle's terms:
 * - any answer the client returns is a fulfilled response (a 404 or a 500 included);
 * - a failure with a last response (retryable statuses exhausted: `UpstreamFailed`; a retry
 *   our budget or the deadline stopped: `BudgetExhausted`, `DeadlineExceeded`) is that
 *   response, fulfilled, as Laravel's Http would have returned it;
 * - without one, after attempts that got no answer (`UpstreamFailed`, or `BudgetExhausted`,
 *   `DeadlineExceeded`, `FunnelFull`, `CircuitOpen` stopping the retries: `failure()` set),
 *   rejects with the exception Guzzle's curl handler gives for that failure, whose previous is
 *   the client's: a failure to reach the upstream (refused, timeouts, TLS, closed before an
 *   answer) is a `ConnectException`, so Laravel raises its `ConnectionException` and
 *   dispatches `ConnectionFailed`; a redirect loop is a `TooManyRedirectsException`, anything
 *   else (a body over `max_body`, one that cannot be read or decoded, a sink that cannot be
 *   written) a `RequestException`;
 * - the client's own refusals before any attempt went out (`FunnelFull`, `CircuitOpen`,
 *   `DeadlineExceeded` with `failure()` null) and bad options reject with the exception
 *   itself.
 *
 * Requests, options, bodies and responses are `#[\SensitiveParameter]`: a stack trace's
 * arguments (`zend.exception_ignore_args=0`, which error trackers collect) would carry their
 * headers and credentials.
 */
final class ResilientHandler
{
    /** Set by Guzzle or derived from the URL and body; the client writes its own. */
    private const DROPPED_HEADERS = ['content-length', 'transfer-encoding', 'expect'];

    /** The request option holding the multipart parts as given (ResilientPendingRequest::sendRequest()). */
    public const PARTS = 'resilient_multipart';

    /**
     * @param list<string> $explicit option names the request itself set
     * @param array $laravelDefaults the options a fresh PendingRequest holds
     */
    public function __construct(
        private ResilientManager $manager,
        private string $name,
        private array $explicit = [],
        private array $laravelDefaults = [],
    ) {
    }

    public function __invoke(#[\SensitiveParameter] RequestInterface $request, #[\SensitiveParameter] array $options): PromiseInterface
    {
        $started = hrtime(true);
        $sink = $options['sink'] ?? null;
        $given = $options;
        unset($options[self::PARTS]);
        try {
            [$uri, $clientOptions] = $this->clientCall($request, $given, withBody: true);
            $answer = $this->manager->clientWithoutFallback($this->name)->request($request->getMethod(), $uri, $clientOptions);
        } catch (Unavailable $e) {
            // An answer not retried (max_attempts, or our budget or the deadline stopped the
            // retry) is that answer, as Laravel's Http would have returned it.
            $answer = $e->response();
            if ($answer === null) {
                // Attempts that reached nothing (`failure()` says why) are Guzzle's failure
                // whatever stopped the retries (the attempts, the budget, the deadline): the same
                // cause, the same exception, however spent the host's budget is.
                $failure = $e instanceof UpstreamFailed || $e->failure() !== null ? self::rejection($e, $request) : $e;
                $this->stats($options, $request, null, $failure, $started, null);

                return Create::rejectionFor($failure);
            }
        } catch (\Throwable $e) {
            $this->stats($options, $request, null, $e, $started, null);

            return Create::rejectionFor($e);
        }
        try {
            $response = new PsrResponse($answer->status(), self::titleCased($answer->headers()), $this->responseBody($answer, $sink));
        } catch (\InvalidArgumentException $e) {
            // A status PSR-7 has no room for (600): rejected, as Guzzle's own handler does.
            $failure = new RequestException("{$answer->status()} is not an HTTP status PSR-7 takes: {$e->getMessage()}", $request, null, $e);
            $this->stats($options, $request, null, $failure, $started, null);

            return Create::rejectionFor($failure);
        }
        $this->stats($options, $request, $response, null, $started, $answer);
        if (($options['cookies'] ?? null) instanceof CookieJarInterface) {
            // Here, not in Guzzle's cookie middleware: the client followed any redirects, and
            // the cookies are the last hop's, for its host (the middleware knows only the first).
            $last = $answer->url();
            $options['cookies']->extractCookies($last === null ? $request : $request->withUri(new Uri($last)), $response);
        }

        return Create::promiseFor($response);
    }

    /**
     * Under Laravel's `Http::fake()`, before a stub answers (ResilientPendingRequest): the
     * checks this call would meet in production, this bridge's (an option it does not take,
     * the protocol version) and the client's (by `CallValidator`, bound to nothing shared), with
     * the same exceptions, so a test cannot pass on a call that fails in production. The body
     * is left out: reading it would move a stream the stub and Laravel's recorder read.
     */
    public function check(#[\SensitiveParameter] RequestInterface $request, #[\SensitiveParameter] array $options): void
    {
        [$uri, $clientOptions] = $this->clientCall($request, $options, withBody: false);
        CallValidator::for($this->name, $this->config())?->validateRequest($request->getMethod(), $uri, $clientOptions);
    }

    /**
     * The call the client is to make for a Guzzle request: its URL and the client's options
     * (GuzzleOptions), with the body (multipart parts as the client takes them, else Guzzle's
     * bytes) when `$withBody`.
     *
     * @return array{0: string, 1: array<string, mixed>}
     */
    private function clientCall(#[\SensitiveParameter] RequestInterface $request, #[\SensitiveParameter] array $options, bool $withBody): array
    {
        GuzzleOptions::checkProtocolVersion($request->getProtocolVersion(), $request->getUri()->getScheme(), $this->name);
        $config = $this->config();
        $given = $options[self::PARTS] ?? null;
        unset($options[self::PARTS]);
        $clientOptions = GuzzleOptions::toClient($options, $this->explicit, array_keys($config), $this->name, $this->laravelDefaults);
        $sink = $options['sink'] ?? null;
        if (is_string($sink) || (is_resource($sink) && (stream_get_meta_data($sink)['wrapper_type'] ?? '') === 'plainfile')) {
            // Written by the client as the body arrives (a path or a plain-file stream).
            $clientOptions['sink'] = $sink;
        }
        $headers = $this->headers($request, $config);
        $parts = $withBody ? self::parts($given, $request) : null;
        if ($parts !== null) {
            // The client encodes them, with a boundary of its own.
            $headers = array_filter($headers, fn ($name) => strcasecmp((string) $name, 'content-type') !== 0, ARRAY_FILTER_USE_KEY);
            $clientOptions['multipart'] = $parts;
        } elseif ($withBody && ($body = $this->body($request->getBody())) !== '') {
            $clientOptions['body'] = $body;
        }
        if ($headers !== []) {
            $clientOptions['headers'] = $headers;
        }
        // (A base URL's query is already in it: ResilientPendingRequest::buildClient().)
        return [(string) $request->getUri()->withFragment(''), $clientOptions];
    }

    /** Failures (`UpstreamFailed::failure()`) that Guzzle's curl handler reports as a `ConnectException`. */
    private const CONNECT_FAILURES = ['timeout', 'connect', 'tls', 'closed'];

    /** What Guzzle would have rejected with, for a call that got no answer. */
    private static function rejection(Unavailable $e, #[\SensitiveParameter] RequestInterface $request): TransferException
    {
        return match (true) {
            in_array($e->failure(), self::CONNECT_FAILURES, true) => new ConnectException($e->getMessage(), $request, $e),
            $e->failure() === 'redirects' => new TooManyRedirectsException($e->getMessage(), $request, null, $e),
            default => new RequestException($e->getMessage(), $request, null, $e),
        };
    }

    /** Header names whose usual spelling is not each word capitalised. */
    private const SPELLINGS = [
        'etag' => 'ETag', 'www-authenticate' => 'WWW-Authenticate', 'content-md5' => 'Content-MD5',
        'dnt' => 'DNT', 'te' => 'TE', 'x-xss-protection' => 'X-XSS-Protection',
        'x-ua-compatible' => 'X-UA-Compatible', 'x-request-id' => 'X-Request-ID',
    ];

    /**
     * Header names as HTTP/1.1 servers usually write them (`X-Total-Count`, `ETag`,
     * `X-RateLimit-Remaining`): the client hands them back lower-cased (the server's own
     * spelling is not kept), and Laravel's `headers()` is a plain array whose keys callers
     * index by the usual spelling. `header()` and PSR-7's `getHeader()` ignore case.
     *
     * @param array<string, list<string>> $headers
     * @return array<string, list<string>>
     */
    private static function titleCased(array $headers): array
    {
        $out = [];
        foreach ($headers as $name => $values) {
            $name = strtolower((string) $name);
            $spelt = self::SPELLINGS[$name] ?? implode('-', array_map('ucfirst', explode('-', $name)));
            $out[str_replace('-Ratelimit-', '-RateLimit-', $spelt)] = $values;
        }

        return $out;
    }

    /** The client's config ([] for a name that is only faked). */
    private function config(): array
    {
        try {
            return $this->manager->clientConfig($this->name);
        } catch (\InvalidArgumentException) {
            return [];
        }
    }

    /** Whether a client's config sets a user agent: `user_agent`, or a `User-Agent` header. */
    private static function userAgentConfigured(#[\SensitiveParameter] array $config): bool
    {
        if (array_key_exists('user_agent', $config)) {
            return true;
        }
        foreach (is_array($config['headers'] ?? null) ? $config['headers'] : [] as $header => $value) {
            if (strcasecmp((string) $header, 'user-agent') === 0) {
                return true;
            }
        }

        return false;
    }

    /** @return array<string, list<string>> */
    private function headers(#[\SensitiveParameter] RequestInterface $request, #[\SensitiveParameter] array $config): array
    {
        $out = [];
        $authority = $request->getUri()->getAuthority();
        $userAgentConfigured = self::userAgentConfigured($config);
        foreach ($request->getHeaders() as $name => $values) {
            $lower = strtolower((string) $name);
            if (in_array($lower, self::DROPPED_HEADERS, true)) {
                continue;
            }
            // Guzzle adds Host from the URI; the client does too.
            if ($lower === 'host' && strcasecmp(implode(', ', $values), $authority) === 0) {
                continue;
            }
            // Guzzle's own User-Agent, which nobody asked for, gives way to the client's
            // configured `user_agent` or `User-Agent` header (without one, Laravel's behaviour
            // stays).
            if ($lower === 'user-agent' && $userAgentConfigured && implode(', ', $values) === \GuzzleHttp\Utils::defaultUserAgent()) {
                continue;
            }
            $out[(string) $name] = $values;
        }

        return $out;
    }

    /**
     * The multipart parts as the client takes them, when the request's body is still the one
     * Guzzle encoded from them (no middleware replaced it or its `Content-Type`) and every
     * part's contents can go as a string or a stream; otherwise null, and Guzzle's bytes go.
     *
     * @return list<array<string, mixed>>|null
     */
    private static function parts(#[\SensitiveParameter] mixed $parts, #[\SensitiveParameter] RequestInterface $request): ?array
    {
        $body = $request->getBody();
        if (! is_array($parts) || ! $body instanceof MultipartStream
            || $request->getHeaderLine('Content-Type') !== 'multipart/form-data; boundary=' . $body->getBoundary()) {
            return null;
        }
        $out = [];
        foreach ($parts as $part) {
            $part = is_array($part) ? self::part($part) : null;
            if ($part === null) {
                return null;
            }
            $out[] = $part;
        }

        return $out;
    }

    /**
     * A Guzzle multipart part as the client takes it, with what Guzzle's MultipartStream adds
     * to it: a file stream's base name when no file name is given, and a `Content-Type` from
     * the file name's extension unless the part's headers have one. Not Guzzle's per-part
     * `Content-Length` (the client refuses one: a receiver ignores it, RFC 7578 4.8). A PSR-7
     * stream goes as a PHP stream; contents that are neither a string, a number, a
     * `Stringable`, a stream nor a PSR-7 stream (an iterator, a callable): null.
     *
     * @param array<mixed> $part
     * @return array<string, mixed>|null
     */
    private static function part(#[\SensitiveParameter] array $part): ?array
    {
        $contents = $part['contents'] ?? '';
        $uri = null;
        if ($contents instanceof StreamInterface) {
            $uri = $contents->getMetadata('uri');
            $contents = \GuzzleHttp\Psr7\StreamWrapper::getResource($contents);
        } elseif (is_resource($contents)) {
            $uri = stream_get_meta_data($contents)['uri'] ?? null;
        } elseif (is_scalar($contents) || $contents instanceof \Stringable) {
            $contents = (string) $contents;
        } else {
            return null;
        }
        // As Guzzle: a file stream's path when the name is empty, php:// and data:// aside.
        if (empty($part['filename']) && is_string($uri) && $uri !== ''
            && ! str_starts_with($uri, 'php://') && ! str_starts_with($uri, 'data://')) {
            $part['filename'] = basename($uri);
        }
        $headers = [];
        foreach (is_array($part['headers'] ?? null) ? $part['headers'] : [] as $name => $value) {
            if (strcasecmp((string) $name, 'content-length') !== 0) {
                $headers[$name] = $value;
            }
        }
        $typed = array_filter(array_keys($headers), fn ($h) => strcasecmp((string) $h, 'content-type') === 0) !== [];
        if (! $typed && is_string($part['filename'] ?? null) && $part['filename'] !== ''
            && ($type = \GuzzleHttp\Psr7\MimeType::fromFilename($part['filename'])) !== null) {
            $headers['Content-Type'] = $type;
        }
        $part['headers'] = $headers;
        $part['contents'] = $contents;

        return $part;
    }

    /** The body Guzzle built (JSON, form, multipart with its boundary, raw), as bytes. */
    private function body(#[\SensitiveParameter] StreamInterface $body): string
    {
        if ($body->getSize() === 0) {
            return '';
        }
        if ($body->isSeekable()) {
            $body->rewind();
        }
        $bytes = $body->getContents();
        if ($body->isSeekable()) {
            $body->rewind();
        }

        return $bytes;
    }

    private function responseBody(#[\SensitiveParameter] Response $answer, #[\SensitiveParameter] mixed $sink): StreamInterface
    {
        if (is_string($sink)) {
            return Utils::streamFor(Utils::tryFopen($sink, 'r'));
        }
        if (is_resource($sink)) {
            if ((stream_get_meta_data($sink)['wrapper_type'] ?? '') !== 'plainfile') {
                // php://temp, php://memory, ...: the client writes only to files; copy the body.
                fwrite($sink, (string) $answer->body());
            }
            rewind($sink);

            return Utils::streamFor($sink);
        }
        if ($sink instanceof StreamInterface) {
            $sink->write((string) $answer->body());
            $sink->rewind();

            return $sink;
        }

        return Utils::streamFor((string) $answer->body());
    }

    /** Guzzle's `on_stats` (Laravel reads transferStats from it), once per call. */
    private function stats(#[\SensitiveParameter] array $options, #[\SensitiveParameter] RequestInterface $request, #[\SensitiveParameter] ?PsrResponse $response, ?\Throwable $error, int $started, #[\SensitiveParameter] ?Response $answer): void
    {
        if (! isset($options['on_stats']) || ! is_callable($options['on_stats'])) {
            return;
        }
        $seconds = $answer !== null ? $answer->elapsedMs() / 1000 : (hrtime(true) - $started) / 1e9;
        // Guzzle reports the last hop's request, so Laravel's effectiveUri() is where redirects
        // led, and that request carries no secret the redirect rules kept from another host.
        if ($answer !== null && $answer->redirected() && $answer->url() !== null) {
            $to = new Uri($answer->url());
            $from = $request->getUri();
            // Another origin (scheme, host or port; Guzzle gives null for a default port, so
            // the scheme tells https:443 from http:80) got no credentials.
            if ($to->getScheme() !== $from->getScheme() || $to->getHost() !== $from->getHost() || $to->getPort() !== $from->getPort()) {
                $request = $request->withoutHeader('Authorization')->withoutHeader('Cookie')->withoutHeader('Proxy-Authorization');
            }
            $request = $request->withUri($to);
        }
        ($options['on_stats'])(new TransferStats($request, $response, $seconds, $error, [
            'resilient_client' => $this->name,
            'resilient_attempts' => $answer?->attempts(),
            'total_time' => $seconds,
        ]));
    }
}
