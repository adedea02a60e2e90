<?php

declare(strict_types=1);

/*
 * One retry-budget decision pair: record an original, then ask for a retry.
 * - resilient: RetryBudget::recordOriginal() + tryConsume() (sliding window in shared memory);
 * - the seed's cache RetryBudget (lab/app/src/Laravel/RetryBudget.php, shared with the lab) on Laravel's redis cache store;
 * - APCu: the same counters with apcu_inc/apcu_fetch (not shared with CLI processes).
 */

require_once __DIR__ . '/../laravel_bootstrap.php';
require_once __DIR__ . '/../../lab/app/src/Laravel/RetryBudget.php';

return [
    'order' => 20,
    'group' => 'budget',
    'title' => 'recordOriginal() + tryConsume() (ratio 0.1, floor 5)',
    'cases' => [
        'resilient' => [
            'label' => 'resilient RetryBudget recordOriginal()+tryConsume() (shm)',
            'ours' => true,
            'ops' => 500_000,
            'make' => function (): Closure {
                $b = new Resilient\RetryBudget('bench-budget-' . getmypid(), ratio: 0.1, floor: 5, window: 60.0);
                return function (int $n) use ($b): void {
                    for ($i = 0; $i < $n; $i++) {
                        $b->recordOriginal();
                        $b->tryConsume();
                    }
                };
            },
        ],
        'seed' => [
            'label' => "seed 000's cache RetryBudget (Laravel Cache, redis store)",
            'ops' => 2_000,
            'requires' => fn () => getenv('RESILIENT_BENCH_REDIS_PORT') ? null : 'no redis-server (run through bench/run.sh)',
            'make' => function (): Closure {
                laravel_bootstrap(['redis_port' => (int) getenv('RESILIENT_BENCH_REDIS_PORT')]);
                $b = new App\Support\RetryBudget('bench-budget-' . getmypid());
                return function (int $n) use ($b): void {
                    for ($i = 0; $i < $n; $i++) {
                        $b->recordOriginal();
                        $b->tryConsume();
                    }
                };
            },
        ],
        'apcu' => [
            'label' => 'APCu counters apcu_inc()+apcu_inc()+apcu_fetch()',
            'ops' => 500_000,
            'requires' => fn () => function_exists('apcu_enabled') && apcu_enabled() ? null : 'APCu not enabled',
            'make' => function (): Closure {
                apcu_store('bench-orig', 0);
                apcu_store('bench-retry', 0);
                return function (int $n): void {
                    for ($i = 0; $i < $n; $i++) {
                        apcu_inc('bench-orig');
                        $ok = apcu_inc('bench-retry') <= 5 + apcu_fetch('bench-orig') * 0.1;
                    }
                };
            },
        ],
    ],
    'targets' => [
        ['faster', 'resilient', 'seed', 150.0],
    ],
];
