<?php

declare(strict_types=1);

/*
 * One funnel decision: take a slot and give it back.
 * - resilient: Funnel::tryAcquire() + Lease::release() on the shared-memory segment;
 * - Laravel 8: the seed's Redis::funnel()->limit()->releaseAfter()->block(0)->then() on phpredis;
 * - APCu: apcu_inc + apcu_dec (fast, but not atomic as a limit check, not shared with CLI
 *   processes, and cleared whole when APCu fills up).
 */

use Illuminate\Support\Facades\Redis;

require_once __DIR__ . '/../laravel_bootstrap.php';

return [
    'order' => 10,
    'group' => 'funnel',
    'title' => 'acquire + release one slot of a funnel (limit 10)',
    'cases' => [
        'resilient' => [
            'label' => 'resilient Funnel tryAcquire()+release() (shm)',
            'ours' => true,
            'ops' => 500_000,
            'make' => function (): Closure {
                $f = new Resilient\Funnel('bench-funnel-' . getmypid(), limit: 10);
                return function (int $n) use ($f): void {
                    for ($i = 0; $i < $n; $i++) {
                        $f->tryAcquire()->release();
                    }
                };
            },
        ],
        'laravel' => [
            'label' => 'Laravel 8 Redis::funnel()->block(0)->then() (phpredis)',
            'ops' => 3_000,
            'requires' => fn () => getenv('RESILIENT_BENCH_REDIS_PORT') ? null : 'no redis-server (run through bench/run.sh)',
            'make' => function (): Closure {
                laravel_bootstrap(['redis_port' => (int) getenv('RESILIENT_BENCH_REDIS_PORT')]);
                $key = 'bench-funnel-' . getmypid();
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
        'apcu' => [
            'label' => 'APCu apcu_inc()+apcu_dec() (per FPM pool, not CLI)',
            'ops' => 500_000,
            'requires' => fn () => function_exists('apcu_enabled') && apcu_enabled() ? null : 'APCu not enabled',
            'make' => function (): Closure {
                apcu_store('bench-funnel', 0);
                return function (int $n): void {
                    for ($i = 0; $i < $n; $i++) {
                        if (apcu_inc('bench-funnel') <= 10) {
                            // slot taken
                        }
                        apcu_dec('bench-funnel');
                    }
                };
            },
        ],
    ],
    'targets' => [
        ['max_us', 'resilient', 1.0],
        ['faster', 'resilient', 'laravel', 150.0],
    ],
];
