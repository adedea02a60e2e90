<?php

declare(strict_types=1);

/*
 * The learned funnel limit (`'limit' => 'auto'`): what every attempt adds to the
 * client's funnel guard when its limit is learned: one clock read, the in-flight load and the
 * update of the name's interval sums in the shared segment (two atomic adds, two loads; the
 * attempt that ends an interval also computes the next limit). Run in a loop inside the
 * extension (Funnel::learnSynthetic), so one PHP call is spread over many updates. Anchor: the
 * metrics recorder's per-attempt cost (same loop shape, Metrics::recordSynthetic).
 */

return [
    'order' => 12,
    'group' => 'adaptive',
    'title' => 'learned funnel limit: the update after one attempt (shm)',
    'cases' => [
        'update' => [
            'label' => 'resilient learned-limit update per attempt (clock, in-flight load, 2 atomic adds; shm)',
            'ours' => true,
            'ops' => 2_000_000,
            'make' => function (): Closure {
                $name = 'bench-adaptive-' . getmypid();
                return function (int $n) use ($name): void {
                    Resilient\Funnel::learnSynthetic($name, $n, 0.02);
                };
            },
        ],
        'metrics' => [
            'label' => 'anchor: metrics record of one call of one attempt (shm)',
            'ops' => 2_000_000,
            'make' => function (): Closure {
                $name = 'bench-adaptive-metrics-' . getmypid();
                return function (int $n) use ($name): void {
                    Resilient\Metrics::recordSynthetic($name, $n);
                };
            },
        ],
    ],
    'targets' => [
        ['max_us', 'update', 0.1],
    ],
];
