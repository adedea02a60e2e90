<?php

declare(strict_types=1);

/*
 * Throughput of a batch of GETs kept 16 in flight (a sliding window) against the local nginx
 * that bench/run.sh starts (bench/http/); one op = one request, a round = one batch of `ops`.
 * - resilient: $client->pool($requests, concurrency: 16), every request under the client's rules;
 * - Guzzle 7.4: GuzzleHttp\Pool with concurrency 16 on one reused Client (curl multi), the
 *   usual way to run a batch in PHP and what Laravel's Http::pool is built on.
 * Every response is checked (status 200 and the body), so a broken client cannot look fast.
 * Anchor measured earlier on this machine: Guzzle Pool c16 ≈ 17.9k req/s.
 */

require_once __DIR__ . '/../http/bench_helpers.php';
require_once '/usr/share/php/GuzzleHttp/autoload.php';

const HTTP_BENCH_CONCURRENCY = 16;

return [
    'order' => 31,
    'group' => 'http-pool',
    'title' => 'pool of GETs at concurrency 16 to local nginx, keep-alive (one op = one request)',
    'cases' => [
        'resilient' => [
            'label' => 'resilient Client->pool(concurrency: 16)',
            'ours' => true,
            'ops' => 4_000,
            'requires' => fn () => http_bench_ours_missing(),
            'make' => function (): Closure {
                http_bench_fresh();
                $client = new Resilient\Client('bench-http-pool', [
                    'base_url' => http_bench_url(),
                    'connect_timeout' => 1.0,
                    'timeout' => 5.0,
                    'deadline' => 30.0,
                ]);
                return function (int $n) use ($client): void {
                    $results = $client->pool(array_fill(0, $n, ['GET', '/']), concurrency: HTTP_BENCH_CONCURRENCY);
                    if (count($results) !== $n) {
                        throw new RuntimeException('pool returned ' . count($results) . " results for $n requests");
                    }
                    foreach ($results as $r) {
                        if ($r instanceof Throwable) {
                            throw $r;
                        }
                        http_bench_check($r->status(), $r->body());
                    }
                };
            },
        ],
        'guzzle' => [
            'label' => 'Guzzle 7.4 Pool(concurrency 16), one Client (curl multi)',
            'ops' => 4_000,
            'requires' => fn () => http_bench_url() === null ? HTTP_BENCH_NO_SERVER : null,
            'make' => function (): Closure {
                http_bench_fresh();
                $client = new GuzzleHttp\Client(['timeout' => 5.0, 'connect_timeout' => 1.0, 'http_errors' => false]);
                $url = http_bench_url() . '/';
                return http_bench_quietly(function (int $n) use ($client, $url): void {
                    $requests = function () use ($n, $url): Generator {
                        for ($i = 0; $i < $n; $i++) {
                            yield new GuzzleHttp\Psr7\Request('GET', $url);
                        }
                    };
                    $done = 0;
                    $pool = new GuzzleHttp\Pool($client, $requests(), [
                        'concurrency' => HTTP_BENCH_CONCURRENCY,
                        'fulfilled' => function ($response) use (&$done): void {
                            http_bench_check($response->getStatusCode(), (string) $response->getBody());
                            $done++;
                        },
                        'rejected' => fn ($reason) => throw new RuntimeException('guzzle: ' . $reason->getMessage()),
                    ]);
                    $pool->promise()->wait();
                    if ($done !== $n) {
                        throw new RuntimeException("guzzle pool answered $done of $n requests");
                    }
                });
            },
        ],
    ],
    'targets' => [
        ['faster', 'resilient', 'guzzle', 1.2],
    ],
];
