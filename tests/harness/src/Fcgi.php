<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * One FastCGI GET straight to a php-fpm pool socket with `cgi-fcgi` (no nginx), for suites that
 * run their own FpmMaster pools. Returns the response body (headers stripped).
 */
final class Fcgi
{
    /** @param array<string, string> $env more FastCGI parameters (DOCUMENT_ROOT: php-fpm reads `.user.ini` files from there down to the script's folder) */
    public static function get(string $socket, string $script, array $query = [], float $timeout = 20.0, array $env = []): string
    {
        $env += [
            'SCRIPT_FILENAME' => $script,
            'SCRIPT_NAME' => '/' . basename($script),
            'REQUEST_METHOD' => 'GET',
            'QUERY_STRING' => http_build_query($query),
            'SERVER_PROTOCOL' => 'HTTP/1.1',
            'GATEWAY_INTERFACE' => 'CGI/1.1',
            'REMOTE_ADDR' => '127.0.0.1',
            'SERVER_NAME' => 'localhost',
            'SERVER_PORT' => '80',
            'PATH' => (string) getenv('PATH'),
        ];
        $proc = proc_open(['cgi-fcgi', '-bind', '-connect', $socket], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot run cgi-fcgi');
        }
        stream_set_blocking($pipes[1], false);
        $out = '';
        $end = microtime(true) + $timeout;
        while (true) {
            $out .= (string) stream_get_contents($pipes[1]);
            if (!proc_get_status($proc)['running']) {
                $out .= (string) stream_get_contents($pipes[1]);
                break;
            }
            if (microtime(true) > $end) {
                proc_terminate($proc, 9);
                throw new \RuntimeException("cgi-fcgi timed out after {$timeout}s");
            }
            usleep(2_000);
        }
        proc_close($proc);
        $parts = preg_split("/\r?\n\r?\n/", $out, 2);
        return $parts[1] ?? $out;
    }
}
