<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;

/**
 * The mock upstream (crates/upstream, `resilient-upstream`) on a loopback port, started by a test
 * class and stopped after it. Scripts are set and recorded attempts read through its control API
 * (`/__control/...`), with plain curl so the client under test never talks to the control plane.
 */
final class MockUpstream
{
    private static ?self $shared = null;

    public readonly int $port;
    private ServiceProcess $process;

    /** One upstream for the whole PHPUnit run (keys keep tests apart). */
    public static function shared(): self
    {
        if (self::$shared === null) {
            self::$shared = new self();
            register_shutdown_function([self::$shared, 'stop']);
        }
        return self::$shared;
    }

    public function __construct()
    {
        $bin = getenv('RESILIENT_UPSTREAM') ?: Run::root() . '/target/release/resilient-upstream';
        if (!is_executable($bin)) {
            throw new \RuntimeException("$bin is missing: cargo build --release -p resilient-upstream");
        }
        $dir = Run::tempDir('upstream');
        $portFile = "$dir/port";
        $this->process = ServiceProcess::start([$bin, '--listen', '127.0.0.1:0', '--port-file', $portFile], "$dir/upstream");
        $end = microtime(true) + 10;
        while (!is_file($portFile) || trim((string) file_get_contents($portFile)) === '') {
            if (microtime(true) > $end || !$this->process->isRunning()) {
                throw new \RuntimeException('the mock upstream did not start: ' . @file_get_contents("$dir/upstream.err"));
            }
            usleep(10_000);
        }
        $this->port = (int) trim((string) file_get_contents($portFile));
    }

    public function stop(): void
    {
        $this->process->stop();
    }

    /** A fresh key: tests never share recorded attempts. */
    public function key(string $tag): string
    {
        return Run::name($tag);
    }

    /** Base URL of a key: requests under it are answered by its script and recorded. */
    public function base(string $key): string
    {
        return "http://127.0.0.1:{$this->port}/k/$key";
    }

    /**
     * Sets what a key answers, request after request; with $path only for that exact path.
     *
     * @param list<array<string,mixed>> $steps
     */
    public function script(string $key, array $steps, string $then = 'repeat_last', ?string $path = null): void
    {
        $this->control('POST', '/__control/script', ['key' => $key, 'steps' => $steps, 'then' => $then] + ($path === null ? [] : ['path' => $path]));
    }

    /**
     * The attempts the key received, each with t_ms (arrival, monotonic ms), headers, query,
     * body, concurrent_at_arrival, max_concurrent, status, end_t_ms. Waits (bounded) until at
     * least $min arrived and (with $idle) none is in flight.
     *
     * @return list<array<string,mixed>>
     */
    public function attempts(string $key, int $min = 0, int $timeoutMs = 5000, bool $idle = true): array
    {
        $idle = $idle ? 1 : 0;
        return $this->control('GET', "/__control/attempts?key=$key&min=$min&idle=$idle&timeout_ms=$timeoutMs");
    }

    private function control(string $method, string $path, ?array $body = null): array
    {
        $ch = curl_init("http://127.0.0.1:{$this->port}$path");
        curl_setopt_array($ch, [
            CURLOPT_CUSTOMREQUEST => $method,
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT => 15,
            CURLOPT_HTTPHEADER => ['Content-Type: application/json'],
        ]);
        if ($body !== null) {
            curl_setopt($ch, CURLOPT_POSTFIELDS, json_encode($body));
        }
        $out = curl_exec($ch);
        $status = curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        curl_close($ch);
        $data = is_string($out) ? json_decode($out, true) : null;
        if ($status !== 200 || !is_array($data)) {
            throw new \RuntimeException("upstream control $method $path: HTTP $status " . substr((string) $out, 0, 500));
        }
        return $data;
    }
}
