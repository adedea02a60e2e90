<?php

declare(strict_types=1);

/*
 * What the HTTPS server saw of one client: its requests (each client asks for a path of its
 * own), on how many connections and over which protocol, read from the access log that
 * bench/http/nginx-tls.conf.template writes ("$connection $uri $server_protocol $http2").
 *
 * Counted by the server rather than asked of the client: a client cannot misreport it, and it
 * is the proof that a pool multiplexes (HTTP/2, one connection) instead of opening one
 * connection per request in flight.
 */

/** @return array{requests: int, connections: int, protocols: array<string, int>} */
function https_bench_seen(string $log, string $path): array
{
    $requests = 0;
    $connections = [];
    $protocols = [];
    foreach (file($log, FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
        $f = explode(' ', $line);
        if (($f[1] ?? null) !== $path) {
            continue;
        }
        $requests++;
        $connections[$f[0]] = true;
        $protocol = $f[2] . (($f[3] ?? '') !== '' ? " ({$f[3]})" : '');
        $protocols[$protocol] = ($protocols[$protocol] ?? 0) + 1;
    }
    return ['requests' => $requests, 'connections' => count($connections), 'protocols' => $protocols];
}

/** E.g. "server saw 1,100 requests on 1 TLS connection, HTTP/2.0 (h2)". */
function https_bench_seen_text(array $seen): string
{
    $protocols = [];
    foreach ($seen['protocols'] as $p => $count) {
        $protocols[] = count($seen['protocols']) === 1 ? $p : "$p × " . number_format($count);
    }
    return sprintf('server saw %s requests on %d TLS connection%s, %s',
        number_format($seen['requests']), $seen['connections'], $seen['connections'] === 1 ? '' : 's',
        $protocols === [] ? 'no protocol' : implode(', ', $protocols));
}
