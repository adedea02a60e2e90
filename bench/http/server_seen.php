<?php

declare(strict_types=1);

/*
 * What the HTTPS server saw of one client (bench/http/nginx-tls.conf.template): its requests
 * (each client asks for a path of its own), on how many TLS connections and over which protocol,
 * from the access log ("$connection $uri $server_protocol $http2"); and how many connections it
 * opened while its case ran, from nginx's accepted-connection counter (stub_status), which also
 * counts connections that never carried a request (a client racing 16 handshakes and keeping
 * one), invisible in the log.
 *
 * Counted by the server rather than asked of the client: a client cannot misreport it, and it
 * is the proof that a pool multiplexes (HTTP/2, one connection) instead of opening one
 * connection per request in flight.
 */

/** Remembers the server's accepted-connection count before the client asking for $path starts
 *  (call in its case's make, before its first request). */
function https_bench_start(string $path): void
{
    $state = &https_bench_state();
    $state[$path] = ['accepted' => https_bench_accepted(), 'seen' => null];
}

/**
 * What the server saw of the client asking for $path, read once the client is done (its case's
 * note: the next client's connections must not count) and kept for the group's targets
 * (https_bench_seen). `opened` is null unless https_bench_start() ran for it.
 *
 * @return array{requests: int, connections: int, protocols: array<string, int>, opened: ?int}
 */
function https_bench_finish(string $path): array
{
    $seen = ['requests' => 0, 'connections' => 0, 'protocols' => [], 'opened' => null];
    $server = https_bench_server();
    if ($server === null) {
        return $seen;
    }
    $connections = [];
    foreach (file($server['log'], FILE_IGNORE_NEW_LINES | FILE_SKIP_EMPTY_LINES) ?: [] as $line) {
        $f = explode(' ', $line);
        if (($f[1] ?? null) !== $path) {
            continue;
        }
        $seen['requests']++;
        $connections[$f[0]] = true;
        $protocol = $f[2] . (($f[3] ?? '') !== '' ? " ({$f[3]})" : '');
        $seen['protocols'][$protocol] = ($seen['protocols'][$protocol] ?? 0) + 1;
    }
    $seen['connections'] = count($connections);
    $state = &https_bench_state();
    if (isset($state[$path])) {
        // Minus the connection of this reading itself (the one at the start counted itself
        // before the client began).
        $seen['opened'] = https_bench_accepted() - $state[$path]['accepted'] - 1;
        $state[$path]['seen'] = $seen;
    }
    return $seen;
}

/** What https_bench_finish() saw for $path, or null if it did not run. */
function https_bench_seen(string $path): ?array
{
    return https_bench_state()[$path]['seen'] ?? null;
}

/** E.g. "server saw 10,200 requests on 1 TLS connection, HTTP/2.0 (h2); 1 connection opened". */
function https_bench_seen_text(array $seen): string
{
    $protocols = [];
    foreach ($seen['protocols'] as $p => $count) {
        $protocols[] = count($seen['protocols']) === 1 ? $p : "$p × " . number_format($count);
    }
    return sprintf('server saw %s requests on %d TLS connection%s, %s%s',
        number_format($seen['requests']), $seen['connections'], $seen['connections'] === 1 ? '' : 's',
        $protocols === [] ? 'no protocol' : implode(', ', $protocols),
        $seen['opened'] === null ? '' : sprintf('; %d connection%s opened', $seen['opened'], $seen['opened'] === 1 ? '' : 's'));
}

/** Connections the server has accepted since it started (this reading's own included). */
function https_bench_accepted(): int
{
    $server = https_bench_server();
    $context = stream_context_create(['http' => ['timeout' => 2.0], 'ssl' => ['cafile' => $server['ca']]]);
    $status = (string) file_get_contents($server['url'] . '/nginx_status', false, $context);
    // "Active connections: 1 \nserver accepts handled requests\n 17 17 10234 \n..."
    if (!preg_match('/^\s*(\d+)\s+\d+\s+\d+\s*$/m', $status, $m)) {
        throw new RuntimeException('unexpected nginx status: ' . substr($status, 0, 200));
    }
    return (int) $m[1];
}

/** @internal By path: the accepted count at the client's start, and what was seen at its finish. */
function &https_bench_state(): array
{
    static $state = [];
    return $state;
}
