<?php

declare(strict_types=1);

namespace Resilient\Tests\Redis;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Http\HttpTestCase;

/**
 * Must-show 1 under real php-fpm: two pools ("hosts") of 6 workers with their own segment
 * paths, every worker serving one long request that calls the mock upstream in a loop, the
 * upstream counting how many attempts it has at once. One Redis funnel of 4: never more than 4
 * across both pools; the shared-memory funnel of 4: each pool its own 4, up to 8.
 */
final class FpmPoolsTest extends HttpTestCase
{
    private const WORKERS = 6;
    private ?ServiceProcess $fpm = null;
    private ?ServiceProcess $redis = null;
    private string $dir;
    private int $port;

    protected function setUp(): void
    {
        parent::setUp();
        $this->dir = Run::tempDir('redis-pools');
        $this->port = Run::freePort();
        $this->redis = ServiceProcess::start(
            ['redis-server', '--bind', '127.0.0.1', '--port', (string) $this->port, '--save', '', '--appendonly', 'no', '--dir', $this->dir],
            $this->dir . '/redis',
        );
        $pools = [];
        foreach (['a', 'b'] as $pool) {
            $pools[$pool] = ['workers' => self::WORKERS, 'ini' => ['resilient.shm_path' => Run::shmPath("redis-pool-$pool-" . bin2hex(random_bytes(3)))]];
        }
        $this->fpm = FpmMaster::start($this->dir, $pools, Run::shmPath('redis-pools-master-' . bin2hex(random_bytes(3))));
        $this->waitFor(fn () => file_exists("{$this->dir}/a.sock") && file_exists("{$this->dir}/b.sock")
            && @fsockopen('127.0.0.1', $this->port) !== false ? true : null, 15.0, 'the pools and redis-server');
    }

    protected function tearDown(): void
    {
        $this->fpm?->stop();
        $this->redis?->stop();
    }

    /** Every worker of both pools runs one request calling for $seconds. @return list<array> */
    private function runPools(array $options, string $key, float $seconds): array
    {
        $name = Run::name('pools');
        $start = microtime(true) + 1.0;
        $spec = base64_encode(json_encode(['name' => $name, 'path' => '/x', 'start_at' => $start, 'stop_at' => $start + $seconds,
            'options' => $options + ['base_url' => $this->up->base($key)]]));
        $procs = [];
        foreach (['a', 'b'] as $pool) {
            for ($i = 0; $i < self::WORKERS; $i++) {
                $env = [
                    'SCRIPT_FILENAME' => __DIR__ . '/fixtures/fpm_host.php', 'SCRIPT_NAME' => '/fpm_host.php',
                    'REQUEST_METHOD' => 'GET', 'QUERY_STRING' => http_build_query(['spec' => $spec]),
                    'SERVER_PROTOCOL' => 'HTTP/1.1', 'GATEWAY_INTERFACE' => 'CGI/1.1', 'REMOTE_ADDR' => '127.0.0.1',
                    'SERVER_NAME' => 'localhost', 'SERVER_PORT' => '80', 'PATH' => (string) getenv('PATH'),
                ];
                $out = "{$this->dir}/$pool-$i-" . hrtime(true) . '.out';
                $procs[] = [proc_open(['cgi-fcgi', '-bind', '-connect', "{$this->dir}/$pool.sock"], [0 => ['file', '/dev/null', 'r'], 1 => ['file', $out, 'w'], 2 => ['file', '/dev/null', 'w']], $pipes, null, $env), $out];
            }
        }
        $answers = [];
        $end = microtime(true) + $seconds + 20;
        foreach ($procs as [$proc, $out]) {
            while (proc_get_status($proc)['running']) {
                if (microtime(true) > $end) {
                    proc_terminate($proc, 9);
                    $this->fail('an FPM request did not end');
                }
                usleep(10_000);
            }
            proc_close($proc);
            $parts = preg_split("/\r?\n\r?\n/", (string) file_get_contents($out), 2);
            $answer = json_decode($parts[1] ?? '', true);
            $this->assertIsArray($answer, (string) file_get_contents($out) . @file_get_contents("{$this->dir}/fpm-error.log"));
            $answers[] = $answer;
        }
        $this->assertCount(2 * self::WORKERS, array_unique(array_column($answers, 'pid')), 'every worker served one request');
        return $answers;
    }

    private function maxConcurrent(string $key): int
    {
        return max(array_map(fn ($a) => (int) $a['max_concurrent'], $this->up->attempts($key, 1)));
    }

    public function testTwoPoolsShareOneRedisFunnelButNotOneSharedMemoryFunnel(): void
    {
        $funnel = ['funnel' => ['limit' => 4, 'wait' => 0.0], 'timeout' => 2.0, 'max_attempts' => 1, 'budget' => false];
        $onRedis = $this->up->key('pools-redis');
        $this->up->script($onRedis, [['status' => 200, 'delay_ms' => 40]]);
        $answers = $this->runPools($funnel + ['backend' => "redis://127.0.0.1:{$this->port}/0", 'on_backend_error' => 'closed'], $onRedis, 1.5);
        $this->assertSame(0, array_sum(array_column($answers, 'backend_fallbacks')), 'Redis answered every time');
        $redisMax = $this->maxConcurrent($onRedis);
        $this->assertLessThanOrEqual(4, $redisMax, 'one limit of 4 across both pools');
        $this->assertGreaterThanOrEqual(3, $redisMax);

        $onShm = $this->up->key('pools-shm');
        $this->up->script($onShm, [['status' => 200, 'delay_ms' => 40]]);
        $this->runPools($funnel + ['backend' => 'shm'], $onShm, 1.5);
        $shmMax = $this->maxConcurrent($onShm);
        $this->assertGreaterThan(4, $shmMax, 'each pool its own limit of 4');
        $this->assertLessThanOrEqual(8, $shmMax);
        fwrite(STDERR, sprintf("\n[redis] 2 FPM pools × %d workers, funnel limit 4: upstream saw at most %d at once on Redis, %d on shared memory\n", self::WORKERS, $redisMax, $shmMax));
    }
}
