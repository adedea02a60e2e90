<?php

declare(strict_types=1);

/*
 * Host-wide metrics, in the bench run's shared segment:
 * - record: what the attempt loop adds to one call of one attempt, through the same recorder
 *   (resilient_http::MetricsEvents): the original, the attempt sent and in flight, its outcome
 *   and latency bucket, the call's end. Run in a loop inside the extension
 *   (Metrics::recordSynthetic), so one PHP call is spread over many records;
 * - snapshot: Metrics::snapshot() with 100 upstream names (the PHP array: ~80 elements each);
 * - prometheus: Metrics::prometheus() with the same 100 names (the text a scrape receives).
 */

const METRICS_BENCH_NAMES = 100;

function metrics_bench_names(): void
{
    static $done = false;
    if (!$done) {
        for ($i = 0; $i < METRICS_BENCH_NAMES; $i++) {
            Resilient\Metrics::recordSynthetic(sprintf('bench-metrics-%d-%03d', getmypid(), $i), 3);
        }
        $done = true;
    }
}

return [
    'order' => 25,
    'group' => 'metrics',
    'title' => 'host-wide metrics: record one call of one attempt; read them',
    'cases' => [
        'record' => [
            'label' => 'resilient record an attempt (originals, attempts, in flight, outcome, latency bucket, call end; shm)',
            'ours' => true,
            'ops' => 2_000_000,
            'make' => function (): Closure {
                $name = 'bench-metrics-record-' . getmypid();
                return function (int $n) use ($name): void {
                    Resilient\Metrics::recordSynthetic($name, $n);
                };
            },
        ],
        'snapshot' => [
            'label' => 'Metrics::snapshot(), 100 upstreams (PHP array)',
            'baseline' => true,
            'ops' => 2_000,
            'make' => function (): Closure {
                metrics_bench_names();
                return function (int $n): void {
                    for ($i = 0; $i < $n; $i++) {
                        Resilient\Metrics::snapshot();
                    }
                };
            },
        ],
        'prometheus' => [
            'label' => 'Metrics::prometheus(), 100 upstreams (text exposition)',
            'baseline' => true,
            'ops' => 1_000,
            'make' => function (): Closure {
                metrics_bench_names();
                return function (int $n): void {
                    for ($i = 0; $i < $n; $i++) {
                        Resilient\Metrics::prometheus();
                    }
                };
            },
        ],
    ],
    'targets' => [
        ['max_us', 'record', 0.1],
        ['max_us', 'snapshot', 20.0],
    ],
];
