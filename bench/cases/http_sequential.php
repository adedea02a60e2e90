<?php

declare(strict_types=1);

/*
 * One GET of a small JSON from the local nginx that bench/run.sh starts (bench/http/), one
 * request after the other, each client used the way an app uses it:
 * - resilient: one Resilient\Client (the attempt loop with its deadline, jitter and retry rules
 *   on every call), keep-alive connections kept by the extension per process;
 * - PHP's curl extension: one handle reused, so the connection stays open — the floor for PHP;
 * - Laravel 8: Http::timeout(5)->get(...) per call, as the seed's ShippingQuoteClient does
 *   (a new PendingRequest and Guzzle client per call, hence a new TCP connection per call:
 *   that is what an app using the facade pays);
 * - Symfony 5.4: one RetryableHttpClient around HttpClient::create() (CurlHttpClient), reused.
 * Every case checks status 200 and the body, so a broken client cannot look fast.
 * Anchors measured earlier on this machine: curl ≈ 10.8k, Laravel ≈ 2.6k, Symfony ≈ 4.9k req/s.
 */

require_once __DIR__ . '/../laravel_bootstrap.php';
require_once __DIR__ . '/../http/bench_helpers.php';
// Laravel's autoloader looks for Guzzle under a path Debian does not use: load it here.
require_once '/usr/share/php/GuzzleHttp/autoload.php';

return [
    'order' => 30,
    'group' => 'http-seq',
    'title' => 'sequential GET of {"ok":true} from local nginx, keep-alive (one op = one request)',
    'cases' => [
        'resilient' => [
            'label' => 'resilient Client->get() (reused client)',
            'ours' => true,
            'ops' => 10_000,
            'requires' => fn () => http_bench_ours_missing(),
            'make' => function (): Closure {
                http_bench_fresh();
                $client = new Resilient\Client('bench-http-seq', [
                    'base_url' => http_bench_url(),
                    'connect_timeout' => 1.0,
                    'timeout' => 5.0,
                    'deadline' => 10.0,
                ]);
                return function (int $n) use ($client): void {
                    for ($i = 0; $i < $n; $i++) {
                        $r = $client->get('/');
                        http_bench_check($r->status(), $r->body());
                    }
                };
            },
        ],
        'curl' => [
            'label' => 'PHP curl ext, one handle reused (keep-alive)',
            'ops' => 10_000,
            'requires' => fn () => match (true) {
                http_bench_url() === null => HTTP_BENCH_NO_SERVER,
                !function_exists('curl_init') => 'curl extension not loaded',
                default => null,
            },
            'make' => function (): Closure {
                http_bench_fresh();
                $h = curl_init(http_bench_url() . '/');
                curl_setopt_array($h, [
                    CURLOPT_RETURNTRANSFER => true,
                    CURLOPT_CONNECTTIMEOUT_MS => 1000,
                    CURLOPT_TIMEOUT_MS => 5000,
                ]);
                return function (int $n) use ($h): void {
                    for ($i = 0; $i < $n; $i++) {
                        $body = curl_exec($h);
                        if ($body === false) {
                            throw new RuntimeException('curl: ' . curl_error($h));
                        }
                        http_bench_check(curl_getinfo($h, CURLINFO_RESPONSE_CODE), $body);
                    }
                };
            },
        ],
        'laravel' => [
            'label' => 'Laravel 8 Http::timeout(5)->get() (Guzzle)',
            'ops' => 1_000,
            'requires' => fn () => http_bench_url() === null ? HTTP_BENCH_NO_SERVER : null,
            'make' => function (): Closure {
                http_bench_fresh();
                // Same Redis port as the other groups, so re-bootstrapping cannot break them.
                laravel_bootstrap(['redis_port' => (int) (getenv('RESILIENT_BENCH_REDIS_PORT') ?: 6379)]);
                $url = http_bench_url() . '/';
                return http_bench_quietly(function (int $n) use ($url): void {
                    for ($i = 0; $i < $n; $i++) {
                        $r = Illuminate\Support\Facades\Http::timeout(5)->get($url);
                        http_bench_check($r->status(), $r->body());
                    }
                });
            },
        ],
        'symfony' => [
            'label' => 'Symfony 5.4 RetryableHttpClient (CurlHttpClient, reused)',
            'ops' => 2_000,
            'requires' => fn () => match (true) {
                http_bench_url() === null => HTTP_BENCH_NO_SERVER,
                !is_file('/usr/share/php/Symfony/Component/HttpClient/autoload.php') => 'php-symfony-http-client not installed',
                default => null,
            },
            'make' => function (): Closure {
                http_bench_fresh();
                require_once '/usr/share/php/Symfony/Component/HttpClient/autoload.php';
                $client = new Symfony\Component\HttpClient\RetryableHttpClient(
                    Symfony\Component\HttpClient\HttpClient::create(['timeout' => 5.0]),
                );
                $url = http_bench_url() . '/';
                return http_bench_quietly(function (int $n) use ($client, $url): void {
                    for ($i = 0; $i < $n; $i++) {
                        $r = $client->request('GET', $url);
                        http_bench_check($r->getStatusCode(), $r->getContent());
                    }
                });
            },
        ],
    ],
    'targets' => [
        ['faster', 'resilient', 'curl', 1.0],
        ['faster', 'resilient', 'laravel', 4.0],
    ],
];
