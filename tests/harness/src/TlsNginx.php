<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * One nginx on loopback with several listeners, each on its own free port, for the client's TLS,
 * mTLS, HTTP/2 and content-encoding tests (certificates from a TestCa):
 *
 *   ok        TLS with server.pem (127.0.0.1 + localhost), HTTP/2 offered by ALPN
 *   wrongHost TLS with wrong-host.pem (a certificate for another name)
 *   expired   TLS with expired.pem
 *   mtls      TLS with server.pem, `ssl_verify_client on` against client-ca.pem; answers with the
 *             client certificate's subject
 *   plain     plain HTTP/1.1
 *
 * On every listener: `/hello` answers "hello from <name>\n"; `/echo-headers` answers the
 * Authorization/Cookie/Via headers it got; anything else is a static file from `www/` (put files
 * there with www()); `/gz/...` files are served as they are with `Content-Encoding: gzip`, and
 * `/deflate/...` with `Content-Encoding: deflate` (pre-encoded bodies for decode_content tests).
 *
 * access.log has one line per request: `port connection connection_requests protocol tls
 * "request" status "client subject" "authorization" "via" bytes`; error.log (level info) has one
 * "while SSL handshaking" line per failed handshake. Both are read through requests() and
 * failedHandshakes() so tests count what the server saw instead of sleeping.
 */
final class TlsNginx
{
    public readonly string $dir;
    /** @var array<string,int> listener name → port */
    public readonly array $ports;
    private ?ServiceProcess $nginx = null;
    private static ?self $shared = null;

    /** One server for the whole PHPUnit run, with the run's TestCa; stopped when PHPUnit exits. */
    public static function shared(): self
    {
        if (self::$shared === null) {
            self::$shared = new self(TestCa::shared());
            register_shutdown_function([self::$shared, 'stop']);
        }
        return self::$shared;
    }

    public function __construct(public readonly TestCa $ca)
    {
        $this->dir = Run::tempDir('tls-nginx');
        mkdir("{$this->dir}/www/gz", 0700, true);
        mkdir("{$this->dir}/www/deflate", 0700, true);
        mkdir("{$this->dir}/tmp", 0700, true);
        $ports = [];
        foreach (['ok', 'wrongHost', 'expired', 'mtls', 'plain'] as $name) {
            $ports[$name] = Run::freePort();
        }
        $this->ports = $ports;
        $this->writeConfig();
        $this->start();
    }

    /** Base URL of a listener, e.g. url('ok') = https://127.0.0.1:PORT. */
    public function url(string $listener, string $host = '127.0.0.1'): string
    {
        $scheme = $listener === 'plain' ? 'http' : 'https';
        return "$scheme://$host:{$this->ports[$listener]}";
    }

    /** Directory served as static files (the `root` of every listener). */
    public function www(): string
    {
        return "{$this->dir}/www";
    }

    /**
     * Access-log lines of one listener, parsed: port, connection, connection_requests, protocol,
     * tls, request, status, client, authorization, via, bytes.
     *
     * @return list<array<string,string>>
     */
    public function requests(string $listener): array
    {
        $port = (string) $this->ports[$listener];
        $rows = [];
        foreach (file("{$this->dir}/access.log", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (!preg_match('/^(\d+) (\d+) (\d+) (\S+) (\S+) "([^"]*)" (\d+) "([^"]*)" "([^"]*)" "([^"]*)" (\d+)$/', $line, $m)) {
                continue;
            }
            if ($m[1] === $port) {
                $rows[] = array_combine(
                    ['port', 'connection', 'connection_requests', 'protocol', 'tls', 'request', 'status', 'client', 'authorization', 'via', 'bytes'],
                    array_slice($m, 1),
                );
            }
        }
        return $rows;
    }

    /**
     * The listener's access-log rows once there are at least $count (nginx writes a line when
     * the request is finalized, which can be just after the client read the response); fails
     * with the logs when they do not come within $timeout seconds.
     *
     * @return list<array<string,string>>
     */
    public function waitForRequests(string $listener, int $count, float $timeout = 5.0): array
    {
        $end = microtime(true) + $timeout;
        while (count($rows = $this->requests($listener)) < $count) {
            if (microtime(true) > $end) {
                throw new \RuntimeException("nginx logged " . count($rows) . " of $count requests on $listener:\n" . $this->logs());
            }
            usleep(5_000);
        }
        return $rows;
    }

    /** error.log lines of handshakes that failed on a listener (nginx logs them at level info). */
    public function failedHandshakes(string $listener): array
    {
        $needle = "server: 127.0.0.1:{$this->ports[$listener]}";
        $lines = [];
        foreach (file("{$this->dir}/error.log", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (str_contains($line, 'while SSL handshaking') && str_contains($line, $needle)) {
                $lines[] = $line;
            }
        }
        return $lines;
    }

    private function writeConfig(): void
    {
        $d = $this->dir;
        $ca = $this->ca;
        $user = posix_geteuid() === 0 ? 'user root;' : '';
        $common = <<<CONF
                    root $d/www;
                    location = /hello { return 200 "hello from \$server_port\\n"; }
                    location = /echo-headers { return 200 "authorization=\$http_authorization\\ncookie=\$http_cookie\\nvia=\$http_via\\n"; }
                    location /gz/ {
                        types { }
                        default_type application/json;
                        add_header Content-Encoding gzip;
                    }
                    location /deflate/ {
                        types { }
                        default_type application/json;
                        add_header Content-Encoding deflate;
                    }
            CONF;
        $tls = static fn (string $name, string $port, string $extra = '') => <<<CONF
                server {
                    listen 127.0.0.1:$port ssl http2;
                    ssl_certificate {$ca->path("$name.pem")};
                    ssl_certificate_key {$ca->path("$name.key")};
                    ssl_protocols TLSv1.2 TLSv1.3;
                    $extra
            $common
                }
            CONF;
        $p = $this->ports;
        $servers = $tls('server', (string) $p['ok'])
            . $tls('wrong-host', (string) $p['wrongHost'])
            . $tls('expired', (string) $p['expired'])
            . $tls('server', (string) $p['mtls'], "ssl_verify_client on;\n            ssl_client_certificate {$ca->path('client-ca.pem')};\n"
                . "            location = /whoami { return 200 \"client \$ssl_client_s_dn\\n\"; }")
            . "    server {\n        listen 127.0.0.1:{$p['plain']};\n$common\n    }\n";
        file_put_contents("$d/nginx.conf", <<<CONF
            $user
            daemon off;
            master_process on;
            worker_processes 1;
            pid $d/nginx.pid;
            error_log $d/error.log info;
            events { worker_connections 512; }
            http {
                log_format t '\$server_port \$connection \$connection_requests \$server_protocol \$ssl_protocol "\$request" \$status "\$ssl_client_s_dn" "\$http_authorization" "\$http_via" \$body_bytes_sent';
                access_log $d/access.log t;
                client_body_temp_path $d/tmp/body;
                proxy_temp_path $d/tmp/proxy;
                fastcgi_temp_path $d/tmp/fastcgi;
                uwsgi_temp_path $d/tmp/uwsgi;
                scgi_temp_path $d/tmp/scgi;
                default_type text/plain;
                keepalive_requests 10000;
                http2_max_concurrent_streams 128;
            $servers
            }
            CONF);
    }

    private function start(): void
    {
        $d = $this->dir;
        $this->nginx = ServiceProcess::start(['nginx', '-p', $d, '-c', "$d/nginx.conf", '-e', "$d/error.log"], "$d/nginx");
        $end = microtime(true) + 10;
        while (microtime(true) < $end && $this->nginx->isRunning()) {
            $ch = curl_init($this->url('plain') . '/hello');
            curl_setopt_array($ch, [CURLOPT_RETURNTRANSFER => true, CURLOPT_TIMEOUT => 1, CURLOPT_PROXY => '']);
            $ok = curl_exec($ch) !== false && curl_getinfo($ch, CURLINFO_RESPONSE_CODE) === 200;
            curl_close($ch);
            if ($ok) {
                // The readiness probe must not show up in the counts the tests take.
                file_put_contents("$d/access.log", '');
                return;
            }
            usleep(20_000);
        }
        $logs = $this->logs();
        $this->stop();
        throw new \RuntimeException("nginx (TLS) did not come up:\n$logs");
    }

    /** Tail of the logs, for failure messages. */
    public function logs(): string
    {
        $out = '';
        foreach (['error.log', 'access.log', 'nginx.err'] as $f) {
            $out .= "--- $f\n" . substr((string) @file_get_contents("{$this->dir}/$f"), -3000) . "\n";
        }
        return $out;
    }

    public function stop(): void
    {
        $this->nginx?->stop();
        $this->nginx = null;
    }

    public function __destruct()
    {
        $this->stop();
    }
}
