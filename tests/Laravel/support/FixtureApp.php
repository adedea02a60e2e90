<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\ProcessResult;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;

/**
 * The fixture Laravel app (tests/fixtures/laravel-app) as the suites drive it: `php artisan ...`
 * in real child processes through the harness's php (extension loaded, plus intl, which
 * Symfony Console needs), on a Redis queue of this run (a redis-server of its own on a free
 * loopback port), with the app's storage in the run's scratch dir.
 *
 * Each instance is one app "deployment": its own queue name, Redis key prefix, storage dir and
 * shared-memory segment, so tests never see each other's jobs or leases.
 */
final class FixtureApp
{
    private static ?ServiceProcess $redisServer = null;
    private static int $redisPort = 0;

    public readonly string $storage;
    public readonly string $queue;
    public readonly string $prefix;
    public readonly string $shmPath;
    private ?\Redis $redis = null;

    /** @param array<string,string> $env extra FIXTURE_* settings (e.g. FIXTURE_UPSTREAM) */
    public function __construct(private array $env = [])
    {
        self::startRedis();
        $this->shmPath = Run::shmPath(Run::name('app'));
        $this->storage = Run::tempDir('laravel-app');
        $this->queue = Run::name('q');
        $this->prefix = Run::name('fixture') . ':';
    }

    public static function stopRedis(): void
    {
        self::$redisServer?->stop();
        self::$redisServer = null;
    }

    /** Runs `php artisan ...$args` to completion. */
    public function artisan(array $args, array $env = [], float $timeout = 30.0): ProcessResult
    {
        return $this->start($args, $env)->wait($timeout);
    }

    /** Starts `php artisan ...$args` and returns at once. */
    public function start(array $args, array $env = []): PhpProcess
    {
        return PhpProcess::args(
            [Run::root() . '/tests/fixtures/laravel-app/artisan', ...$args],
            $this->ini(),
            $env + $this->env + [
                'FIXTURE_STORAGE' => $this->storage,
                'FIXTURE_REDIS_PORT' => (string) self::$redisPort,
                'FIXTURE_REDIS_PREFIX' => $this->prefix,
                'FIXTURE_QUEUE' => $this->queue,
            ],
        );
    }

    /** `php -r $code` with the same extension and segment as the app (e.g. a process holding a lease). */
    public function php(string $code): PhpProcess
    {
        return PhpProcess::code($code, $this->ini());
    }

    /** ini for children: intl (Symfony Console needs it) and this app's segment. */
    public function ini(): array
    {
        return ['extension' => 'intl', 'resilient.shm_path' => $this->shmPath];
    }

    /** Dispatches one job the way application code does, through the app. */
    public function dispatch(string $job, string ...$args): void
    {
        $r = $this->artisan(['fixture:dispatch', $job, ...$args]);
        if ($r->exitCode !== 0) {
            throw new \RuntimeException("dispatch $job failed:\n" . $r->describe());
        }
    }

    /** @return list<array> payloads waiting on the queue now */
    public function ready(): array
    {
        return array_map(fn ($p) => json_decode($p, true), $this->redis()->lRange("queues:{$this->queue}", 0, -1));
    }

    /** @return list<array{payload: array, available_at: int}> released or delayed jobs */
    public function delayed(): array
    {
        $out = [];
        foreach ($this->redis()->zRange("queues:{$this->queue}:delayed", 0, -1, true) as $payload => $score) {
            $out[] = ['payload' => json_decode($payload, true), 'available_at' => (int) $score];
        }
        return $out;
    }

    /** @return list<array> what the fixture jobs recorded under $tag (storage/outcomes) */
    public function outcomes(string $tag): array
    {
        $file = "{$this->storage}/outcomes/$tag.jsonl";
        if (!is_file($file)) {
            return [];
        }
        return array_map(fn ($l) => json_decode($l, true), array_filter(explode("\n", (string) file_get_contents($file))));
    }

    private function redis(): \Redis
    {
        if ($this->redis === null) {
            $this->redis = new \Redis();
            $this->redis->connect('127.0.0.1', self::$redisPort, 2.0);
            $this->redis->setOption(\Redis::OPT_PREFIX, $this->prefix);
        }
        return $this->redis;
    }

    private static function startRedis(): void
    {
        if (self::$redisServer !== null) {
            return;
        }
        $port = Run::freePort();
        $dir = Run::tempDir('redis');
        self::$redisServer = ServiceProcess::start(
            ['redis-server', '--bind', '127.0.0.1', '--port', (string) $port, '--save', '', '--appendonly', 'no', '--dir', $dir],
            "$dir/redis",
        );
        register_shutdown_function([self::class, 'stopRedis']);
        $end = microtime(true) + 10;
        while (true) {
            try {
                $r = new \Redis();
                if (@$r->connect('127.0.0.1', $port, 0.2) && $r->ping()) {
                    break;
                }
            } catch (\RedisException) {
            }
            if (microtime(true) > $end || !self::$redisServer->isRunning()) {
                throw new \RuntimeException('redis-server did not start: ' . @file_get_contents("$dir/redis.out"));
            }
            usleep(20_000);
        }
        self::$redisPort = $port;
    }
}
