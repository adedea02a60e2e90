<?php

declare(strict_types=1);

/*
 * What the HTTP benchmark cases (bench/cases/http_*.php, https_*.php) share: where the local
 * nginx servers are and how an answer is checked. bench/run.sh starts them (bench/http/nginx.sh)
 * and exports their URLs as RESILIENT_BENCH_HTTP_URL and RESILIENT_BENCH_HTTPS_URL.
 */

const HTTP_BENCH_NO_SERVER = 'no local nginx (run through bench/run.sh)';
const HTTP_BENCH_NO_CLIENT = 'not available: Resilient\Client is not in this build of the extension';

/** The server's base URL without a trailing slash, or null outside bench/run.sh. */
function http_bench_url(): ?string
{
    $url = getenv('RESILIENT_BENCH_HTTP_URL');
    return $url === false || $url === '' ? null : rtrim($url, '/');
}

/**
 * The HTTPS server (TLS from a test CA, HTTP/2 by ALPN: bench/http/nginx-tls.conf.template): its
 * base URL, the CA's PEM file the clients must trust and its access log, or null outside
 * bench/run.sh, which exports them as RESILIENT_BENCH_HTTPS_URL, _CA and _LOG.
 *
 * @return array{url: string, ca: string, log: string}|null
 */
function https_bench_server(): ?array
{
    $env = [];
    foreach (['url' => 'URL', 'ca' => 'CA', 'log' => 'LOG'] as $key => $suffix) {
        $value = getenv("RESILIENT_BENCH_HTTPS_$suffix");
        if ($value === false || $value === '') {
            return null;
        }
        $env[$key] = $value;
    }
    $env['url'] = rtrim($env['url'], '/');
    return $env;
}

/** Why our client's case cannot run, or null when it can. */
function http_bench_ours_missing(): ?string
{
    return match (true) {
        http_bench_url() === null => HTTP_BENCH_NO_SERVER,
        !class_exists('Resilient\Client') => HTTP_BENCH_NO_CLIENT,
        default => null,
    };
}

/** Fails the case (the runner prints it) when an answer is not the server's 200 JSON, so a
 *  broken client cannot look fast. */
function http_bench_check(int $status, string $body): void
{
    if ($status !== 200 || $body !== '{"ok":true}') {
        throw new RuntimeException("unexpected answer: status $status, " . strlen($body) . ' bytes');
    }
}

/**
 * Runs $loop with PHP 8.2 deprecation notices off: Laravel 8 and Guzzle 7.4 raise some on every
 * request (dynamic properties), and printing them would be measured along with the client.
 */
function http_bench_quietly(Closure $loop): Closure
{
    return function (int $n) use ($loop): void {
        $old = error_reporting(E_ALL & ~E_DEPRECATED & ~E_USER_DEPRECATED);
        try {
            $loop($n);
        } finally {
            error_reporting($old);
        }
    };
}

/**
 * Called first in every case's make: collects the cycles earlier cases left behind (Laravel's
 * Http leaves thousands), so they are not collected on this case's clock. Measured here: the
 * Symfony case ran at ~5k req/s after the Laravel one without this, ~8.5k with it.
 */
function http_bench_fresh(): void
{
    gc_collect_cycles();
}
