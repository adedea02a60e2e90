<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Response;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCa;

/**
 * HTTP/2 refusals: nginx ends a connection after `keepalive_requests` streams with
 * GOAWAY(NO_ERROR), and the streams the client had already opened above its last-stream-id were
 * never processed (RFC 9113 §6.8, §8.7: safe to send again, whatever the method). Such a request
 * goes again on a new connection within its attempt: a POST without an idempotency key does not
 * fail, and a GET spends no retry. What nginx logged proves each request was processed exactly
 * once.
 */
final class Http2RefusedTest extends ClientTestCase
{
    /** Streams nginx serves on one connection before its GOAWAY. */
    private const PER_CONNECTION = 20;
    private const REQUESTS = 300;

    private static ?ServiceProcess $nginx = null;
    private static string $dir;
    private static int $port;

    public static function setUpBeforeClass(): void
    {
        $ca = TestCa::shared();
        self::$dir = Run::tempDir('h2-refused');
        self::$port = Run::freePort();
        $d = self::$dir;
        $user = posix_geteuid() === 0 ? 'user root;' : '';
        $per = self::PER_CONNECTION;
        $port = self::$port;
        file_put_contents("$d/nginx.conf", <<<CONF
            $user
            daemon off;
            worker_processes 1;
            pid $d/nginx.pid;
            error_log $d/error.log;
            events { worker_connections 512; }
            http {
                log_format r '\$connection \$request_method \$uri \$status';
                access_log $d/access.log r;
                client_body_temp_path $d/body;
                proxy_temp_path $d/proxy;
                fastcgi_temp_path $d/fastcgi;
                uwsgi_temp_path $d/uwsgi;
                scgi_temp_path $d/scgi;
                server {
                    listen 127.0.0.1:{$port} ssl http2;
                    ssl_certificate {$ca->path('server.pem')};
                    ssl_certificate_key {$ca->path('server.key')};
                    keepalive_requests $per;
                    location / { return 200 "ok\\n"; }
                }
            }
            CONF);
        self::$nginx = ServiceProcess::start(['nginx', '-p', $d, '-c', "$d/nginx.conf", '-e', "$d/error.log"], "$d/nginx");
        $end = microtime(true) + 10;
        while (@stream_socket_client('tcp://127.0.0.1:' . self::$port, $errno, $error, 0.2) === false) {
            if (microtime(true) > $end || !self::$nginx->isRunning()) {
                throw new \RuntimeException("nginx did not come up:\n" . @file_get_contents("$d/error.log") . @file_get_contents("$d/nginx.err"));
            }
            usleep(20_000);
        }
    }

    public static function tearDownAfterClass(): void
    {
        self::$nginx?->stop();
        self::$nginx = null;
    }

    /** @return array<string, array{string}> */
    public static function methods(): array
    {
        return ['POST without an idempotency key' => ['POST'], 'GET' => ['GET']];
    }

    /** @dataProvider methods */
    public function testRequestsAboveAGoawaysLastStreamGoAgainWithinTheirAttempt(string $method): void
    {
        $tag = strtolower($method) . bin2hex(random_bytes(3));
        $client = $this->client('https://127.0.0.1:' . self::$port, [
            'verify' => TestCa::shared()->path('ca.pem'),
            'timeout' => 5,
            'budget' => false,
        ]);
        $requests = [];
        for ($i = 0; $i < self::REQUESTS; $i++) {
            $requests["r$i"] = [$method, "/$tag/$i"];
        }
        $results = $client->pool($requests, 16);

        $failed = array_map(self::describe(...), array_filter($results, fn ($r) => !$r instanceof Response));
        $this->assertSame([], array_slice($failed, 0, 3, true), count($failed) . ' of ' . self::REQUESTS . ' failed');
        $retried = array_keys(array_filter($results, fn (Response $r) => $r->attempts() !== 1));
        $this->assertSame([], $retried, 'a refused stream is sent again within its attempt: no retry spent');
        $this->assertCount(self::REQUESTS, array_filter($this->attemptLog, fn ($a) => $a['status'] === 200));

        // Each request processed exactly once, over as many connections as nginx's limit makes.
        $rows = $this->waitFor(function () use ($tag) {
            $rows = $this->logged($tag);
            return count($rows) >= self::REQUESTS ? $rows : null;
        }, 5.0, 'nginx to log every request')[0];
        $paths = array_column($rows, 'uri');
        sort($paths);
        $expected = array_map(fn ($i) => "/$tag/$i", range(0, self::REQUESTS - 1));
        sort($expected);
        $this->assertSame($expected, $paths, 'every request reached nginx once');
        $this->assertSame([$method], array_values(array_unique(array_column($rows, 'method'))));
        $connections = count(array_unique(array_column($rows, 'connection')));
        $this->assertGreaterThanOrEqual(intdiv(self::REQUESTS, self::PER_CONNECTION), $connections, 'nginx ended connections with GOAWAY');
    }

    /** @return list<array{connection: string, method: string, uri: string, status: string}> */
    private function logged(string $tag): array
    {
        $rows = [];
        foreach (file(self::$dir . '/access.log', FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            [$connection, $method, $uri, $status] = explode(' ', $line) + [3 => ''];
            if (str_starts_with($uri, "/$tag/")) {
                $rows[] = compact('connection', 'method', 'uri', 'status');
            }
        }
        return $rows;
    }
}
