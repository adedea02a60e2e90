<?php

declare(strict_types=1);

/*
 * The Redis backend (crates/redis) against Laravel on the same redis-server, in the same run:
 * - funnel: one admission + release on Redis (one EVALSHA + one ZREM) through
 *   Client::benchBackend(), vs Laravel 8's Redis::funnel()->block(0)->then() (phpredis);
 * - budget: recordOriginal() + tryConsume() on Redis (an EVALSHA written without waiting,
 *   then one waited for), vs seed 000's cache RetryBudget (Laravel Cache, redis store).
 * Target: ours at most 0.5× Laravel's time (≥ 2× as fast).
 */

require_once __DIR__ . '/../laravel_bootstrap.php';
require_once __DIR__ . '/../../lab/app/src/Laravel/RetryBudget.php';

$redisUrl = fn (): string => 'redis://127.0.0.1:' . (int) getenv('RESILIENT_BENCH_REDIS_PORT') . '/0?prefix=bench:';
$needsRedis = fn () => getenv('RESILIENT_BENCH_REDIS_PORT') ? null : 'no redis-server (run through bench/run.sh)';

return [
    'order' => 25,
    'group' => 'redis-budget',
    'title' => 'recordOriginal() + tryConsume() (ratio 0.1, floor 5) kept in Redis',
    'cases' => [
        'resilient' => [
            'label' => 'resilient budget on Redis (EVALSHA not waited for + EVALSHA)',
            'ours' => true,
            'ops' => 5_000,
            'requires' => $needsRedis,
            'make' => function () use ($redisUrl): Closure {
                $name = 'bench-redis-budget-' . getmypid();
                $options = ['backend' => $redisUrl(), 'on_backend_error' => 'closed', 'budget' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0]];
                return function (int $n) use ($name, $options): void {
                    // A retry allowed per 10 originals (ratio 0.1): fewer is a budget that did no
                    // work (Redis unreachable: 'closed' refuses at once, and would look fast).
                    if (Resilient\Client::benchBackend($name, $options, 'budget', $n) < intdiv($n, 20)) {
                        throw new RuntimeException('budget refused its retries: Redis unreachable?');
                    }
                };
            },
        ],
        'seed' => [
            'label' => "seed 000's cache RetryBudget (Laravel Cache, redis store)",
            'ops' => 2_000,
            'requires' => $needsRedis,
            'make' => function (): Closure {
                laravel_bootstrap(['redis_port' => (int) getenv('RESILIENT_BENCH_REDIS_PORT')]);
                $b = new App\Support\RetryBudget('bench-redis-budget-seed-' . getmypid());
                return function (int $n) use ($b): void {
                    for ($i = 0; $i < $n; $i++) {
                        $b->recordOriginal();
                        $b->tryConsume();
                    }
                };
            },
        ],
    ],
    'targets' => [
        ['faster', 'resilient', 'seed', 2.0],
    ],
];
