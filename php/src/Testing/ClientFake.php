<?php

namespace Resilient\Laravel\Testing;

use Closure;
use Resilient\Client;
use Resilient\Laravel\Http\ConfiguredHeaders;
use Resilient\Response;
use Resilient\Unavailable;

/**
 * Stands in for a named `Resilient\Client` under `Resilient::fake()`: the same methods, no
 * upstream, no funnel or budget touched. Each call is recorded and answered from the name's
 * script (see FakeClients).
 *
 * Each call is first checked by a real client (`validateRequest()`, which sends nothing): a call
 * the real client refuses (a misspelt option, a bad method, `$json` beside option `json`) throws
 * the same exception here, and is not recorded, so a test cannot pass on a call that fails in
 * production. Without the extension nothing is checked.
 *
 * Paths, data and options are `#[\SensitiveParameter]`: a stack trace's arguments
 * (`zend.exception_ignore_args=0`, which error trackers collect) would carry their headers,
 * credentials and bodies.
 */
final class ClientFake
{
    /** The body options; a non-empty `$json` argument beside one of them is refused. */
    private const BODIES = ['json' => true, 'body' => true, 'form' => true, 'multipart' => true];

    /** The extension's default `retry_on` (docs/client-options.md). */
    private const RETRY_ON = [429, 503];

    /** The real client that checks the calls, once built (see checker()). */
    private ?Client $checker = null;

    /**
     * @param Closure(): \Resilient\Client $real the real client, for a stray call when strays are allowed
     * @param callable|null $fallback the client's `fallback` option: called with a scripted
     *        `Unavailable` instead of throwing it, as the real client does
     */
    public function __construct(
        private string $name,
        private FakeClients $fakes,
        #[\SensitiveParameter] private Closure $real,
        #[\SensitiveParameter] private ?string $baseUrl,
        private mixed $fallback = null,
        #[\SensitiveParameter] private ?Closure $config = null,
    ) {
    }

    /** Whether this fake stands for a client with this base URL and fallback. */
    public function madeFor(#[\SensitiveParameter] ?string $baseUrl, mixed $fallback): bool
    {
        return $baseUrl === $this->baseUrl && $fallback === $this->fallback;
    }

    public function name(): string
    {
        return $this->name;
    }

    /** The same fake (same script and records) that throws an `Unavailable` instead of calling the fallback. */
    public function withoutFallback(): self
    {
        $copy = clone $this;
        $copy->fallback = null;

        return $copy;
    }

    public function get(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $query = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('GET', $path, $query, $options ?? []);
    }

    public function head(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $query = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('HEAD', $path, $query, $options ?? []);
    }

    public function post(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('POST', $path, $json, $options ?? []);
    }

    public function put(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('PUT', $path, $json, $options ?? []);
    }

    public function patch(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('PATCH', $path, $json, $options ?? []);
    }

    public function delete(#[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $json = null, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call('DELETE', $path, $json, $options ?? []);
    }

    public function request(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $options = null): mixed
    {
        return $this->call($method, $path, null, $options ?? []);
    }

    /**
     * `key => [method, path, options?]`, answered in order; like the real pool, an
     * `Unavailable` comes back as a value, not thrown.
     *
     * @return array<array-key, Response|Unavailable>
     */
    public function pool(#[\SensitiveParameter] array $requests, mixed $concurrency = null): array
    {
        $concurrency = self::concurrency($concurrency);
        // Every item is checked before any is answered: the real pool sends none of them when one is refused.
        $items = [];
        foreach ($requests as $key => $item) {
            $items[$key] = $this->poolItem(self::label((string) $key), $item);
        }
        $out = [];
        foreach ($items as $key => [$method, $path, $options]) {
            try {
                // No fallback here: the real pool does not call it either.
                $out[$key] = $this->answer($method, $path, null, $options);
            } catch (Unavailable $e) {
                $out[$key] = $e;
            }
        }

        return $out;
    }

    /**
     * A pool item as the real pool reads it (src/client.rs `pool_item`: keys 0, 1 and 2, the
     * method and path strings, the options an array or null), checked by the real client. As
     * there, every error of the request built from it (its method, its URL, its options) names
     * the item.
     *
     * @return array{0: string, 1: string, 2: array}
     */
    /**
     * The pool's concurrency as the real client reads it, also from code in PHP's coercive mode
     * (where an `?int` parameter would take 5.5 as 5): an int, or a number or numeric string
     * whose value is one; 5 when null.
     */
    private static function concurrency(mixed $given): int
    {
        $number = is_string($given) && is_numeric($given) ? +$given : ($given ?? 5);
        if (! is_int($number) && ! (is_float($number) && floor($number) === $number && abs($number) < 2 ** 62)) {
            throw new \TypeError(sprintf('Resilient\\Client::pool(): Argument #2 ($concurrency) must be of type int, %s given', get_debug_type($given)));
        }
        $number = (int) $number;
        if ($number < 1 || $number > 1024) {
            throw new \ValueError("Resilient\\Client::pool(): argument 'concurrency' must be between 1 and 1024, got $number");
        }

        return $number;
    }

    /**
     * A pool key as the real pool's messages show it (`resilient_http::shown_label`): keys made
     * from URLs are common, so a URL without its user-info, query and fragment; any other key
     * up to its first character that is not a letter, digit, space or one of `-_./`, then "…".
     */
    private static function label(#[\SensitiveParameter] string $key): string
    {
        $url = parse_url($key);
        if (is_array($url) && isset($url['scheme'], $url['host'])) {
            return strtolower($url['scheme']) . '://' . strtolower($url['host']) . (isset($url['port']) ? ':' . $url['port'] : '') . ($url['path'] ?? '/');
        }
        $plain = preg_match('~^[\p{L}\p{N} ._/-]*~u', $key, $m) === 1 ? $m[0] : '';
        $shown = mb_substr($plain, 0, 64);

        return strlen($shown) < strlen($key) ? $shown . '…' : $shown;
    }

    private function poolItem(string $label, #[\SensitiveParameter] mixed $item): array
    {
        if (! is_array($item) || array_diff_key($item, [0, 1, 2]) !== [] || ! is_string($item[0] ?? null) || ! is_string($item[1] ?? null)
            || ! (($item[2] ?? null) === null || is_array($item[2]))) {
            throw new \ValueError("pool request '$label': must be [method, path, options?]");
        }
        [$method, $path, $options] = [$item[0], $item[1], $item[2] ?? []];
        try {
            $this->checker()?->validateRequest($method, $path, $options);
        } catch (\ValueError|\TypeError|\InvalidArgumentException $e) {
            $class = get_class($e);
            throw new $class("pool request '$label': " . $e->getMessage(), 0, $e);
        }

        return [strtoupper(trim($method)), $path, $options];
    }

    /** A Response, or with a `fallback` its value when the answer is an `Unavailable`. */
    private function call(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $data, #[\SensitiveParameter] array $options): mixed
    {
        $this->check($method, $path, $data, $options);
        $method = strtoupper(trim($method));
        try {
            return $this->answer($method, $path, $data, $options);
        } catch (Unavailable $e) {
            if ($this->fallback === null) {
                throw $e;
            }

            return ($this->fallback)($e);
        }
    }

    /**
     * Throws what the real client throws for this call, sending nothing. A verb's `$data` goes
     * where the real verb puts it (src/client.rs `verb`, src/options.rs `request`): a query
     * before the options' `query` (whose keys replace its own), a non-empty JSON body refused
     * beside another body once the other options are read.
     */
    private function check(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $data, #[\SensitiveParameter] array $options): void
    {
        // The check reads a multipart part's stream as a real call would: seekable ones are put
        // back where they were (the recorded request, a stray call, still read them), others
        // are checked as empty contents.
        $positions = [];
        foreach ($options['multipart'] ?? [] as $i => $part) {
            $stream = is_array($part) ? ($part['contents'] ?? null) : null;
            if (is_resource($stream) && get_resource_type($stream) === 'stream') {
                if (stream_get_meta_data($stream)['seekable'] && ($at = ftell($stream)) !== false) {
                    $positions[] = [$stream, $at];
                } else {
                    $options['multipart'][$i]['contents'] = '';
                }
            }
        }
        try {
            $this->checkRequest($method, $path, $data, $options);
        } finally {
            foreach ($positions as [$stream, $at]) {
                fseek($stream, $at);
            }
        }
    }

    private function checkRequest(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $data, #[\SensitiveParameter] array $options): void
    {
        $checker = $this->checker();
        if ($checker === null || $data === null) {
            $checker?->validateRequest($method, $path, $options);

            return;
        }
        if (in_array($method, ['GET', 'HEAD'], true)) {
            // The real get() and head() refuse request options given as the query (they would
            // be sent in the URL) before a validator says that it sends nothing: the same
            // check, in the same words.
            try {
                $method === 'GET' ? $checker->get($path, $data) : $checker->head($path, $data);
            } catch (\LogicException) {
            }
            $query = $options['query'] ?? null;
            if ($query === null || $query === false) {
                $options['query'] = $data;
            } elseif (is_array($query)) {
                $options['query'] = array_replace($data, $query);
            }   // else refused as it is
        } elseif ($data !== []) {
            $bodies = array_intersect_key($options, self::BODIES);
            if ($bodies !== []) {
                $checker->validateRequest($method, $path, array_diff_key($options, $bodies));
                throw new \ValueError("option 'json': only one of 'json', 'body', 'form' and 'multipart' may be given (a non-empty \$json argument is the JSON body)");
            }
            $options['json'] = $data;
        }
        $checker->validateRequest($method, $path, $options);
    }

    /**
     * A client that checks the calls (CallValidator), built once from the name's config. Null
     * without the extension (or one older than `validator()`): the calls are not checked.
     */
    private function checker(): ?Client
    {
        return $this->checker ??= CallValidator::for($this->name, $this->entry(), $this->baseUrl);
    }

    /** The name's client config as it is now ([] for a name only faked). */
    private function entry(): array
    {
        return $this->config !== null ? ($this->config)() : [];
    }

    /**
     * The statuses the client retries (its `retry_on`, the extension's default without one): a
     * scripted answer with one of them ends the call as the real client's attempts ending on it.
     *
     * @return list<int>
     */
    private static function retryOn(#[\SensitiveParameter] array $config): array
    {
        $statuses = $config['retry_on'] ?? self::RETRY_ON;

        return is_array($statuses) ? array_map('intval', array_filter($statuses, 'is_numeric')) : self::RETRY_ON;
    }

    /** The scripted answer to one call (recorded), or the real client's for a stray one. */
    private function answer(string $method, #[\SensitiveParameter] string $path, #[\SensitiveParameter] ?array $data, #[\SensitiveParameter] array $options): Response
    {
        $config = $this->entry();
        $request = new RecordedRequest($this->name, $method, $path, $data, $options, $this->baseUrl, ConfiguredHeaders::of($config));

        return $this->fakes->answer($request, self::retryOn($config), function () use ($method, $path, $data, $options) {
            $real = ($this->real)();

            return match ($method) {
                'GET' => $real->get($path, $data, $options),
                'HEAD' => $real->head($path, $data, $options),
                'POST' => $real->post($path, $data, $options),
                'PUT' => $real->put($path, $data, $options),
                'PATCH' => $real->patch($path, $data, $options),
                'DELETE' => $real->delete($path, $data, $options),
                default => $real->request($method, $path, $options),
            };
        });
    }
}
