<?php

namespace Resilient\Laravel\Testing;

use Closure;
use Resilient\Response;
use Resilient\Unavailable;

/**
 * Stands in for a named `Resilient\Client` under `Resilient::fake()`: the same methods, no
 * upstream, no funnel or budget touched. Each call is recorded and answered from the name's
 * script (see FakeClients).
 */
final class ClientFake
{
    /**
     * @param Closure(): \Resilient\Client $real the real client, for a stray call when strays are allowed
     * @param callable|null $fallback the client's `fallback` option: called with a scripted
     *        `Unavailable` instead of throwing it, as the real client does
     */
    public function __construct(
        private string $name,
        private FakeClients $fakes,
        private Closure $real,
        private ?string $baseUrl,
        private mixed $fallback = null,
    ) {
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

    public function get(string $path, ?array $query = null, ?array $options = null): mixed
    {
        return $this->call('GET', $path, $query, $options ?? []);
    }

    public function head(string $path, ?array $query = null, ?array $options = null): mixed
    {
        return $this->call('HEAD', $path, $query, $options ?? []);
    }

    public function post(string $path, ?array $json = null, ?array $options = null): mixed
    {
        return $this->call('POST', $path, $json, $options ?? []);
    }

    public function put(string $path, ?array $json = null, ?array $options = null): mixed
    {
        return $this->call('PUT', $path, $json, $options ?? []);
    }

    public function patch(string $path, ?array $json = null, ?array $options = null): mixed
    {
        return $this->call('PATCH', $path, $json, $options ?? []);
    }

    public function delete(string $path, ?array $json = null, ?array $options = null): mixed
    {
        return $this->call('DELETE', $path, $json, $options ?? []);
    }

    public function request(string $method, string $path, ?array $options = null): mixed
    {
        return $this->call(strtoupper(trim($method)), $path, null, $options ?? []);
    }

    /**
     * `key => [method, path, options?]`, answered in order; like the real pool, an
     * `Unavailable` comes back as a value, not thrown.
     *
     * @return array<array-key, Response|Unavailable>
     */
    public function pool(array $requests, ?int $concurrency = null): array
    {
        $concurrency ??= 5;   // the real client's default
        if ($concurrency < 1 || $concurrency > 1024) {
            throw new \ValueError("Resilient\\Client::pool(): argument 'concurrency' must be between 1 and 1024, got $concurrency");
        }
        $out = [];
        foreach ($requests as $key => $item) {
            [$method, $path, $options] = array_pad(array_values((array) $item), 3, []);
            try {
                // No fallback here: the real pool does not call it either.
                $out[$key] = $this->answer(strtoupper(trim((string) $method)), (string) $path, null, $options ?? []);
            } catch (Unavailable $e) {
                $out[$key] = $e;
            }
        }

        return $out;
    }

    /** A Response, or with a `fallback` its value when the answer is an `Unavailable`. */
    private function call(string $method, string $path, ?array $data, array $options): mixed
    {
        try {
            return $this->answer($method, $path, $data, $options);
        } catch (Unavailable $e) {
            if ($this->fallback === null) {
                throw $e;
            }

            return ($this->fallback)($e);
        }
    }

    /** The scripted answer to one call (recorded), or the real client's for a stray one. */
    private function answer(string $method, string $path, ?array $data, array $options): Response
    {
        $request = new RecordedRequest($this->name, $method, $path, $data, $options, $this->baseUrl);

        return $this->fakes->answer($request, function () use ($method, $path, $data, $options) {
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
