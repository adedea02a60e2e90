<?php

declare(strict_types=1);

/*
 * Pools of 100 GETs kept 16 in flight over HTTPS, against the local nginx with TLS from a test
 * CA and HTTP/2 that bench/run.sh starts (bench/http/nginx-tls.conf.template); one op = one
 * request, a round = as many pools of 100 as it takes. The warm-up round begins with a pool of
 * 100 from a cold start (TLS handshakes included), the shape of the goal "a pool of 100 at
 * concurrency 16 uses 1 connection", and the connection counts include it.
 * - resilient: $client->pool(..., concurrency: 16) with `verify => ca.pem`: HTTP/2 by ALPN, so
 *   the 16 in flight should share one connection;
 * - Guzzle 7.4: GuzzleHttp\Pool with concurrency 16 on one reused Client, CurlMultiHandler,
 *   HTTP/2 requested (protocol version 2.0 → CURL_HTTP_VERSION_2_0, i.e. h2 by ALPN on https)
 *   and `verify => ca.pem`: what a Laravel app's Http::pool against an HTTP/2 API runs on.
 * Each client asks for a path of its own, so the server tells how many TLS connections each
 * opened and used, and over which protocol (bench/http/server_seen.php; shown under its row).
 * Every response is checked (status 200 and the body), so a broken client cannot look fast.
 */

require_once __DIR__ . '/../http/bench_helpers.php';
require_once __DIR__ . '/../http/server_seen.php';
require_once '/usr/share/php/GuzzleHttp/autoload.php';

const HTTPS_BENCH_POOL = 100;
const HTTPS_BENCH_CONCURRENCY = 16;

/** Runs $n requests as pools of HTTPS_BENCH_POOL (the last one smaller if $n is not a multiple). */
function https_bench_pools(int $n, Closure $pool): void
{
    for ($left = $n; $left > 0; $left -= HTTPS_BENCH_POOL) {
        $pool(min(HTTPS_BENCH_POOL, $left));
    }
}

return [
    'order' => 32,
    'group' => 'https-pool',
    'title' => 'pools of 100 GETs at concurrency 16 to local nginx over TLS + HTTP/2 (one op = one request)',
    'cases' => [
        'resilient' => [
            'label' => 'resilient Client->pool(concurrency: 16), verify => ca.pem',
            'ours' => true,
            'ops' => 2_000,
            'requires' => fn () => match (true) {
                https_bench_server() === null => HTTP_BENCH_NO_SERVER,
                !class_exists('Resilient\Client') => HTTP_BENCH_NO_CLIENT,
                default => null,
            },
            'make' => function (): Closure {
                http_bench_fresh();
                $server = https_bench_server();
                https_bench_start('/resilient');
                $client = new Resilient\Client('bench-https-pool', [
                    'base_url' => $server['url'],
                    'verify' => $server['ca'],
                    'connect_timeout' => 1.0,
                    'timeout' => 5.0,
                    'deadline' => 30.0,
                ]);
                return fn (int $n) => https_bench_pools($n, function (int $size) use ($client): void {
                    $results = $client->pool(array_fill(0, $size, ['GET', '/resilient']), concurrency: HTTPS_BENCH_CONCURRENCY);
                    if (count($results) !== $size) {
                        throw new RuntimeException('pool returned ' . count($results) . " results for $size requests");
                    }
                    foreach ($results as $r) {
                        if ($r instanceof Throwable) {
                            throw $r;
                        }
                        http_bench_check($r->status(), $r->body());
                    }
                });
            },
            'note' => fn () => https_bench_seen_text(https_bench_finish('/resilient')),
        ],
        'guzzle' => [
            'label' => 'Guzzle 7.4 Pool(concurrency 16), curl multi, HTTP/2, verify',
            'ops' => 2_000,
            'requires' => fn () => https_bench_server() === null ? HTTP_BENCH_NO_SERVER : null,
            'make' => function (): Closure {
                http_bench_fresh();
                $server = https_bench_server();
                https_bench_start('/guzzle');
                $client = new GuzzleHttp\Client([
                    'handler' => GuzzleHttp\HandlerStack::create(new GuzzleHttp\Handler\CurlMultiHandler()),
                    'verify' => $server['ca'],
                    'timeout' => 5.0,
                    'connect_timeout' => 1.0,
                    'http_errors' => false,
                ]);
                $url = $server['url'] . '/guzzle';
                return http_bench_quietly(fn (int $n) => https_bench_pools($n, function (int $size) use ($client, $url): void {
                    // A Request object carries its own protocol version (Guzzle's `version`
                    // option only reaches requests the Client builds itself): 2.0 → curl asks
                    // for h2 by ALPN.
                    $requests = function () use ($size, $url): Generator {
                        for ($i = 0; $i < $size; $i++) {
                            yield new GuzzleHttp\Psr7\Request('GET', $url, [], null, '2.0');
                        }
                    };
                    $done = 0;
                    $pool = new GuzzleHttp\Pool($client, $requests(), [
                        'concurrency' => HTTPS_BENCH_CONCURRENCY,
                        'fulfilled' => function ($response) use (&$done): void {
                            http_bench_check($response->getStatusCode(), (string) $response->getBody());
                            $done++;
                        },
                        'rejected' => fn ($reason) => throw new RuntimeException('guzzle: ' . $reason->getMessage()),
                    ]);
                    $pool->promise()->wait();
                    if ($done !== $size) {
                        throw new RuntimeException("guzzle pool answered $done of $size requests");
                    }
                }));
            },
            'note' => fn () => https_bench_seen_text(https_bench_finish('/guzzle')),
        ],
    ],
    'targets' => [
        ['check', 'resilient multiplexes: every request on 1 TLS connection, HTTP/2', function (): array {
            $seen = https_bench_seen('/resilient');
            if ($seen === null) {
                return [false, 'resilient did not run'];
            }
            $protocols = array_keys($seen['protocols']);
            return [$seen['requests'] > 0 && $seen['connections'] === 1 && $protocols === ['HTTP/2.0 (h2)'],
                sprintf('%d connection%s, %s', $seen['connections'], $seen['connections'] === 1 ? '' : 's',
                    implode(', ', $protocols) ?: 'no request')];
        }],
        // Apart from the above: a pool that starts 16 requests on a cold client can race 16
        // handshakes and keep only the first HTTP/2 connection. The log cannot show that (the
        // others carry no request); the server's accepted count does.
        ['check', 'resilient opens 1 TLS connection (no handshake race at a cold start)', function (): array {
            $opened = https_bench_seen('/resilient')['opened'] ?? null;
            return [$opened === 1, $opened === null ? 'resilient did not run' : "$opened opened"];
        }],
    ],
];
