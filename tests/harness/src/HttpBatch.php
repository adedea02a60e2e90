<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * Several GETs in flight at once (curl_multi), driven by the test: start them, keep them moving
 * with tick() while the test observes the world, then collect the answers. Bounded by a timeout.
 */
final class HttpBatch
{
    private \CurlMultiHandle $multi;
    /** @var array<int|string, \CurlHandle> */
    private array $handles = [];
    /** @var array<int,true> spl_object_id of handles whose transfer ended */
    private array $done = [];

    /** @param array<int|string,string> $urls */
    public function __construct(array $urls, float $timeout = 30.0)
    {
        $this->multi = curl_multi_init();
        foreach ($urls as $k => $url) {
            $h = Http::handle($url, $timeout);
            $this->handles[$k] = $h;
            curl_multi_add_handle($this->multi, $h);
        }
        $this->tick();
    }

    /** Move transfers forward; returns the number still running. */
    public function tick(float $wait = 0.005): int
    {
        curl_multi_exec($this->multi, $running);
        if ($running > 0) {
            curl_multi_select($this->multi, $wait);
            curl_multi_exec($this->multi, $running);
        }
        while (($info = curl_multi_info_read($this->multi)) !== false) {
            $this->done[spl_object_id($info['handle'])] = true;
        }
        return $running;
    }

    /** Keep ticking until $condition() holds or $timeout passes. */
    public function tickUntil(callable $condition, float $timeout): bool
    {
        $end = microtime(true) + $timeout;
        while (microtime(true) < $end) {
            $this->tick();
            if ($condition()) {
                return true;
            }
        }
        return false;
    }

    /** Number of requests whose transfer has ended. */
    public function finished(): int
    {
        return count($this->done);
    }

    /**
     * Finish everything (bounded) and return key => decoded JSON body (or ['_raw' => body]),
     * each with '_status'.
     * @return array<int|string,array>
     */
    public function results(float $timeout = 30.0): array
    {
        $end = microtime(true) + $timeout;
        while ($this->tick(0.05) > 0 && microtime(true) < $end) {
        }
        $out = [];
        foreach ($this->handles as $k => $h) {
            $body = (string) curl_multi_getcontent($h);
            $data = json_decode($body, true);
            $out[$k] = (is_array($data) ? $data : ['_raw' => $body]) + ['_status' => (int) curl_getinfo($h, CURLINFO_RESPONSE_CODE)];
            curl_multi_remove_handle($this->multi, $h);
        }
        $this->handles = [];
        return $out;
    }
}
