<?php

namespace Resilient\Laravel\Http;

use InvalidArgumentException;

/**
 * Guzzle request options (as Laravel's PendingRequest and Guzzle's Client hand them to a
 * handler) turned into `Resilient\Client::request()` options, or refused by name.
 *
 * By the time a handler runs, Guzzle has already applied `headers`, `query`, `json`,
 * `form_params`, `multipart`, `body` and basic `auth` to the PSR-7 request, and its
 * middleware (kept above the handler) apply `http_errors` and `cookies`. What is left is
 * either mapped here, or refused: a silently ignored option would be a lie about what was sent.
 *
 * Precedence for the connection options (verify, cert, ssl_key, proxy, allow_redirects,
 * decode_content): what the request set wins; else the named client's config; else Laravel's
 * defaults. Guzzle fills in its defaults (verify, decode_content, env proxy) on every request,
 * and they equal the client's own, so only `allow_redirects` differs: Laravel follows up to 5
 * redirects, the client none. A client whose config says nothing keeps Laravel's behaviour.
 */
final class GuzzleOptions
{
    /** Applied by Guzzle or Laravel before the handler runs (or only meaningful to them). */
    private const DONE_ABOVE = [
        'handler', 'synchronous', 'laravel_data', 'http_errors', 'cookies', 'idn_conversion',
        'base_uri', 'headers', 'query', 'json', 'form_params', 'multipart', 'body', 'on_stats',
    ];

    /** Connection options the client knows under the same name. */
    private const TRANSPORT = ['verify', 'cert', 'ssl_key', 'proxy', 'allow_redirects', 'decode_content'];

    /** Refused unless "off" (null, false, 0, '', []), with why. */
    private const REFUSED = [
        'delay' => 'a fixed delay before sending contradicts the deadline; use the client\'s backoff',
        'progress' => 'callbacks inside an attempt would run PHP in the middle of the Rust transport; listen to Resilient\\Laravel\\Events\\AttemptMade instead',
        'on_headers' => 'callbacks inside an attempt would run PHP in the middle of the Rust transport; listen to Resilient\\Laravel\\Events\\AttemptMade instead',
        'stream' => 'bodies are read whole (or to a sink) within the attempt timeout',
        'read_timeout' => 'the attempt timeout bounds the whole exchange; use timeout',
        'version' => 'HTTP/2 is negotiated by ALPN for https://; http:// is HTTP/1.1',
        'force_ip_resolve' => 'not offered by the client',
        'expect' => 'the body is sent at once (no 100-continue)',
        'debug' => 'not offered by the client; listen to Resilient\\Laravel\\Events\\AttemptMade or set resilient.log_channel',
        'curl' => 'the client does not use curl',
        'stream_context' => 'the client does not use PHP streams',
        'cert_type' => 'the client reads PEM only',
    ];

    /**
     * @param array $options the options the handler received
     * @param list<string> $explicit option names the request itself set (withOptions() and the like, send()'s $options)
     * @param list<string> $configured option names the client's config sets
     * @param array $laravelDefaults the options a fresh PendingRequest holds (skipped when unchanged)
     * @return array options for Resilient\Client::request() (no body, headers or sink: the handler adds those)
     */
    public static function toClient(#[\SensitiveParameter] array $options, #[\SensitiveParameter] array $explicit, #[\SensitiveParameter] array $configured, string $name, #[\SensitiveParameter] array $laravelDefaults = []): array
    {
        $out = [];
        foreach ($options as $key => $value) {
            $key = (string) $key;
            if (in_array($key, self::DONE_ABOVE, true) || $key === 'sink') {
                continue;
            }
            // Guzzle's middleware keep their own state in `__`-prefixed options (the redirect
            // middleware's `__redirect_count`, under Http::fake()): bookkeeping, not a request option.
            if (str_starts_with($key, '__')) {
                continue;
            }
            if (in_array($key, self::TRANSPORT, true)) {
                $byRequest = in_array($key, $explicit, true);
                $laravelDefault = $key === 'allow_redirects' && ! in_array($key, $configured, true);
                if ($byRequest || $laravelDefault) {
                    // A string decode_content is already the request's Accept-Encoding header.
                    $out[$key] = $key === 'decode_content' && is_string($value) ? true : $value;
                }
                continue;
            }
            // Laravel's own defaults (9+: timeout 30, connect_timeout 10; 11+: crypto_method)
            // reach the handler on every request: the request did not ask for them, so the
            // client's config stays in force and nothing is refused.
            if (array_key_exists($key, $laravelDefaults) && $laravelDefaults[$key] === $value) {
                continue;
            }
            switch ($key) {
                case 'timeout':
                case 'connect_timeout':
                    // Guzzle's 0 means "no limit": the client's own timeout applies. Anything else
                    // goes to the client as given, which refuses a bad value ('abc', -1) naming
                    // the option, and reads a numeric string as a number, as in config.
                    if ($value !== null && ! (is_numeric($value) && (float) $value === 0.0)) {
                        $out[$key] = $value;
                    }
                    continue 2;
                case 'idempotency_key':
                    if ($value !== null && $value !== '') {
                        $out[$key] = $value;
                    }
                    continue 2;
                case 'auth':
                    $type = is_array($value) ? strtolower((string) ($value[2] ?? 'basic')) : 'basic';
                    if (! empty($value) && $type !== 'basic') {
                        throw self::refused($name, 'auth', "'$type' authentication is not offered; basic auth (sent as an Authorization header) is");
                    }
                    continue 2;
            }
            if (array_key_exists($key, self::REFUSED)) {
                if (! in_array($value, [null, false, 0, 0.0, '', []], true)) {
                    throw self::refused($name, $key, self::REFUSED[$key]);
                }
                continue;
            }
            throw self::refused($name, $key, 'unknown to the resilient bridge (supported: ' . implode(', ', self::supported()) . ')');
        }

        return $out;
    }

    /**
     * Guzzle moves the `version` option into the PSR-7 request (1.1 unless given) before the
     * handler runs, so it never reaches toClient(): the request's protocol version is checked
     * here instead. The client speaks HTTP/1.1, and HTTP/2 on https:// when the server offers
     * it (ALPN): 2.0 is accepted there, as Guzzle's curl handler negotiates it; any other
     * version, or 2.0 on http:// (no h2c), is refused rather than silently sent as 1.1.
     */
    public static function checkProtocolVersion(string $version, string $scheme, string $name): void
    {
        $http2 = in_array($version, ['2', '2.0'], true) && strtolower($scheme) === 'https';
        if ($version !== '1.1' && ! $http2) {
            throw self::refused($name, 'version', self::REFUSED['version'] . "; only 1.1 may be asked for (2.0 on https://), got '$version' for $scheme://");
        }
    }

    /** Every option name the bridge accepts. */
    public static function supported(): array
    {
        return array_merge(self::TRANSPORT, ['timeout', 'connect_timeout', 'sink', 'idempotency_key', 'auth (basic)'], self::DONE_ABOVE);
    }

    private static function refused(string $name, string $key, string $why): InvalidArgumentException
    {
        return new InvalidArgumentException("resilient: Http::resilient('$name'): option '$key' is not supported: $why");
    }
}
