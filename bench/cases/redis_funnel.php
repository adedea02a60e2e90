<?php

declare(strict_types=1);

/*
 * The Redis backend (crates/redis) against Laravel on the same redis-server, in the same run:
 * - funnel: one admission + release on Redis (one EVALSHA + one ZREM) through
 *   Client::benchBackend(), vs Laravel 8's Redis::funnel()->block(0)->then() (phpredis);
 * - budget: recordOriginal() + tryConsume() on Redis (an EVALSHA written without waiting,
 *   then one waited for), vs seed 000's cache RetryBudget (Laravel Cache, redis store).
 * Target: ours at most 0.5× Laravel's time (≥ 2× as fast). Beside them, the floor of any
 * admission on Redis: one round trip of a script that does nothing (phpredis, same server).
 */

use Illuminate\Support\Facades\Redis;

require_once __DIR__ . '/../laravel_bootstrap.php';

$redisUrl = fn (): string => 'redis://127.0.0.1:' . (int) getenv('RESILIENT_BENCH_REDIS_PORT') . '/0?prefix=bench:';
$needsRedis = fn () => getenv('RESILIENT_BENCH_REDIS_PORT') ? null : 'no redis-server (run through bench/run.sh)';

return [
    'order' => 15,
    'group' => 'redis-funnel',
    'title' => 'acquire + release one slot of a funnel (limit 10) kept in Redis',
    'cases' => [
        'resilient' => [
            'label' => 'resilient funnel on Redis (EVALSHA + ZREM)',
            'ours' => true,
            'ops' => 5_000,
            'requires' => $needsRedis,
            'make' => function () use ($redisUrl): Closure {
                $name = 'bench-redis-funnel-' . getmypid();
                $options = ['backend' => $redisUrl(), 'on_backend_error' => 'closed', 'funnel' => ['limit' => 10, 'lease' => 5.0]];
                return function (int $n) use ($name, $options): void {
                    if (Resilient\Client::benchBackend($name, $options, 'funnel', $n) !== $n) {
                        throw new RuntimeException('funnel full or Redis unreachable');
                    }
                };
            },
        ],
        'laravel' => [
            'label' => 'Laravel 8 Redis::funnel()->block(0)->then() (phpredis)',
            'ops' => 3_000,
            'requires' => $needsRedis,
            'make' => function (): Closure {
                laravel_bootstrap(['redis_port' => (int) getenv('RESILIENT_BENCH_REDIS_PORT')]);
                $key = 'bench-redis-funnel-laravel-' . getmypid();
                return function (int $n) use ($key): void {
                    for ($i = 0; $i < $n; $i++) {
                        Redis::funnel($key)->limit(10)->releaseAfter(5)->block(0)->then(
                            fn () => null,
                            fn () => throw new RuntimeException('funnel full'),
                        );
                    }
                };
            },
        ],
        'roundtrip' => [
            'label' => 'the floor: one round trip, a no-op script (phpredis EVALSHA of "return 1")',
            'ops' => 5_000,
            'requires' => $needsRedis,
            'make' => function (): Closure {
                $redis = new \Redis();
                $redis->connect('127.0.0.1', (int) getenv('RESILIENT_BENCH_REDIS_PORT'));
                $sha = $redis->script('load', 'return 1');
                return function (int $n) use ($redis, $sha): void {
                    for ($i = 0; $i < $n; $i++) {
                        $redis->evalSha($sha);
                    }
                };
            },
        ],
    ],
    'targets' => [
        ['faster', 'resilient', 'laravel', 2.0],
    ],
];
