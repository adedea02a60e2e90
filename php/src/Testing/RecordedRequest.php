<?php

namespace Resilient\Laravel\Testing;

use Resilient\Laravel\Events\AttemptMade;
use Resilient\Laravel\GivenText;

/**
 * One call made to a faked client, as the code under test made it; what
 * `Resilient::assertSent(fn (RecordedRequest $request, $outcome) => ...)` receives.
 */
final class RecordedRequest
{
    /**
     * A header whose name holds one of these carries credentials (Authorization,
     * Proxy-Authorization, Cookie, Set-Cookie, X-Api-Key, X-Session-Token...).
     */
    private const SECRET_WORDS = ['token', 'secret', 'key', 'auth', 'cookie', 'password'];

    /**
     * What the call was given (path, data, options, base URL, configured headers), kept wrapped:
     * `dump()`/`dd()`, `var_export()` and PHPUnit's failure diffs list an object's properties
     * whatever `__debugInfo()` says, and show a `SensitiveParameterValue` without its value.
     */
    private \SensitiveParameterValue $given;

    /**
     * @param array|null $data a verb's second argument: the query of get()/head(), the JSON of post()/put()/...
     * @param array $options the per-request options (`headers`, `query`, `json`, `idempotency_key`, ...)
     * @param array<string, string|list<string>> $configured the client's configured headers
     *        (its `headers`, and `user_agent` as User-Agent unless they name one)
     */
    public function __construct(
        private string $client,
        private string $method,
        #[\SensitiveParameter] string $path,
        #[\SensitiveParameter] ?array $data,
        #[\SensitiveParameter] array $options,
        #[\SensitiveParameter] ?string $baseUrl,
        #[\SensitiveParameter] array $configured = [],
    ) {
        $this->given = new \SensitiveParameterValue(compact('path', 'data', 'options', 'baseUrl', 'configured'));
    }

    private function given(string $what): mixed
    {
        return $this->given->getValue()[$what];
    }

    /**
     * What `var_dump()` and `print_r()` show: the call's client, method and URL without
     * user-info or query, and its headers with the values of those that carry credentials
     * masked. Never the body, the query or the options, which may hold secrets too; the
     * accessors still give everything.
     */
    public function __debugInfo(): array
    {
        $headers = [];
        foreach ($this->headers() as $name => $values) {
            $headers[$name] = self::isSecretHeader((string) $name) ? '(not shown)' : implode(', ', $values);
        }

        return ['client' => $this->client, 'method' => $this->method, 'url' => AttemptMade::safeUrl($this->url()), 'headers' => $headers];
    }

    private static function isSecretHeader(string $name): bool
    {
        $name = strtolower($name);
        foreach (self::SECRET_WORDS as $word) {
            if (str_contains($name, $word)) {
                return true;
            }
        }

        return false;
    }

    /** The client's name. */
    public function client(): string
    {
        return $this->client;
    }

    /** Upper case, as sent. */
    public function method(): string
    {
        return $this->method;
    }

    /** The path (or absolute URL) as given to the client. */
    public function path(): string
    {
        return $this->given('path');
    }

    /**
     * The URL the real client would call, without the query: the path joined to `base_url`
     * (Laravel's join, the base's own query and fragment left out), both trimmed as the client
     * trims them (Unicode whitespace: U+00A0 too).
     */
    public function url(): string
    {
        $path = explode('?', $this->withoutFragment(), 2)[0];
        if (! $this->joinsBase()) {
            return $path;
        }
        $base = rtrim(preg_split('/[?#]/', GivenText::trimmed($this->given('baseUrl')))[0], '/');

        return GivenText::trimmed($this->given('path')) === '' ? $base : $base . '/' . ltrim($path, '/');
    }

    /** The trimmed path without its fragment (`#...`, never sent; a `?` after it is part of it). */
    private function withoutFragment(): string
    {
        return explode('#', GivenText::trimmed($this->given('path')), 2)[0];
    }

    /**
     * A post()/put()/patch()/delete() `$json` argument, when it is the body: the client
     * ignores an empty one (the options' body, if any, is sent).
     */
    private function jsonArgument(): ?array
    {
        return $this->given('data') !== [] && ! in_array($this->method, ['GET', 'HEAD'], true) ? $this->given('data') : null;
    }

    /** Whether the path is joined to `base_url` (a relative path), as the real client does. */
    private function joinsBase(): bool
    {
        return $this->given('baseUrl') !== null && ! preg_match('#^https?://#i', GivenText::trimmed($this->given('path')));
    }

    /**
     * As Laravel's `Request::data()`: a non-empty `$json` argument, else the options' `json` or `form`, else
     * a raw `body` read by its Content-Type (form: parsed, JSON: decoded; `Http::resilient()`
     * sends its bodies so), else the query.
     */
    public function data(): array
    {
        $given = $this->jsonArgument() ?? $this->given('options')['json'] ?? $this->given('options')['form'] ?? null;
        if (is_array($given)) {
            return $given;
        }
        $body = $this->given('options')['body'] ?? null;
        $type = strtolower((string) $this->header('content-type'));
        if (is_string($body) && str_contains($type, 'application/x-www-form-urlencoded')) {
            parse_str($body, $form);

            return $form;
        }
        if (is_string($body) && str_contains($type, 'json')) {
            $json = json_decode($body, true);

            return is_array($json) ? $json : [];
        }

        return $this->query();
    }

    /**
     * The query, in the order the real client sends it (later keys win): `base_url`'s own
     * (`?v=2`, for a relative path), the path's (`/quote?postcode=10110`, as `Http::resilient()`
     * passes it), get()/head()'s data, the options' `query`.
     */
    public function query(): array
    {
        $fromBase = $fromPath = [];
        if ($this->joinsBase()) {
            parse_str((string) parse_url(GivenText::trimmed($this->given('baseUrl')), PHP_URL_QUERY), $fromBase);
        }
        $path = $this->withoutFragment();
        $q = strpos($path, '?');
        if ($q !== false) {
            parse_str(substr($path, $q + 1), $fromPath);
        }
        $verb = in_array($this->method, ['GET', 'HEAD'], true) ? ($this->given('data') ?? []) : [];
        $options = $this->given('options')['query'] ?? null;   // null or false: none

        return array_replace($fromBase, $fromPath, $verb, is_array($options) ? $options : []);
    }

    /**
     * The JSON body: post()/put()/patch()/delete()'s non-empty data, or the options' `json`, or a raw
     * `body` sent as JSON (`Content-Type: application/json`, as `Http::resilient()` sends it).
     */
    public function json(): mixed
    {
        if (($json = $this->jsonArgument()) !== null) {
            return $json;
        }
        if (array_key_exists('json', $this->given('options'))) {
            return $this->given('options')['json'];
        }
        $body = $this->given('options')['body'] ?? null;
        if (is_string($body) && $body !== '' && str_contains(strtolower((string) $this->header('content-type')), 'json')) {
            return json_decode($body, true);
        }

        return null;
    }

    public function options(): array
    {
        return $this->given('options');
    }

    /** A header's values joined with ", " (case-insensitive name), or null; `Idempotency-Key` from `idempotency_key` too. */
    public function header(string $name): ?string
    {
        $values = $this->headers()[strtolower($name)] ?? null;

        return $values === null ? null : implode(', ', $values);
    }

    public function hasHeader(string $name): bool
    {
        return $this->header($name) !== null;
    }

    /**
     * The client's configured headers (`headers`, `user_agent`), a JSON, form or multipart
     * body's Content-Type in place of a configured one, each replaced by the call's own
     * `headers` of that name, as the client sends them (docs/client-options.md, `headers`).
     *
     * @return array<string, list<string>> lower-case name => values
     */
    public function headers(): array
    {
        $configured = self::lowerCased($this->given('configured'));
        if (($type = $this->bodyType()) !== null) {
            $configured['content-type'] = [$type];
        }
        $out = array_replace($configured, self::lowerCased($this->given('options')['headers'] ?? []));
        if (isset($this->given('options')['idempotency_key'])) {
            $out['idempotency-key'] = [(string) $this->given('options')['idempotency_key']];
        }

        return $out;
    }

    /**
     * The Content-Type the client gives the body, which replaces a configured one: a JSON body
     * (a non-empty `$json` argument, option `json`), a `form` or `multipart` one; none for a
     * raw `body` (sent under the configured type) or no body. A multipart boundary is chosen
     * by the client as it sends, so it is not part of it here.
     */
    private function bodyType(): ?string
    {
        return match (true) {
            // `null` is no body, as the client reads it.
            $this->jsonArgument() !== null, isset($this->given('options')['json']) => 'application/json',
            isset($this->given('options')['form']) => 'application/x-www-form-urlencoded',
            isset($this->given('options')['multipart']) => 'multipart/form-data',
            default => null,
        };
    }

    /** @return array<string, list<string>> */
    private static function lowerCased(#[\SensitiveParameter] array $headers): array
    {
        $out = [];
        foreach ($headers as $name => $value) {
            foreach ((array) $value as $v) {
                $out[strtolower((string) $name)][] = (string) $v;
            }
        }

        return $out;
    }
}
