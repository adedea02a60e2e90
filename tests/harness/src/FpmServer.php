<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * Real php-fpm behind real nginx on loopback, serving tests/fixtures/fpm/index.php.
 *
 * One php-fpm master (FpmMaster: the extension loaded in the master, as in production) runs
 * two static pools on unix sockets:
 *   - "main": 8 workers, default ini (web caps 10 s / 3 s);
 *   - "solo": 1 worker with resilient.web_timeout = 4, so consecutive requests reach the same
 *     worker (request-end cleanup) and an ini-tuned cap can be seen.
 * nginx listens on a free 127.0.0.1 port: /solo/... goes to "solo", everything else to "main".
 *
 * All files (configs, sockets, pids, logs) live in a per-server directory of the run; both
 * processes are recorded for the shell runner's cleanup and stopped by stop(), which also runs at
 * PHP shutdown.
 */
final class FpmServer
{
    private static ?self $shared = null;

    public readonly string $dir;
    public readonly int $port;
    public readonly string $shmPath;
    private ?ServiceProcess $fpm = null;
    private ?ServiceProcess $nginx = null;

    /** The suite's one server, started on first use and stopped when PHPUnit exits. */
    public static function shared(): self
    {
        if (self::$shared === null) {
            self::$shared = new self((string) ini_get('resilient.shm_path'));
            register_shutdown_function([self::$shared, 'stop']);
        }
        return self::$shared;
    }

    public function __construct(string $shmPath, int $mainWorkers = 8)
    {
        $this->shmPath = $shmPath;
        $this->dir = Run::tempDir('fpm');
        mkdir($this->dir . '/signal', 0777, true);
        mkdir($this->dir . '/nginx-tmp', 0700, true);
        $this->port = Run::freePort();
        $this->writeNginxConfig();
        $this->start($mainWorkers);
    }

    private function writeNginxConfig(): void
    {
        $d = $this->dir;
        $app = Run::root() . '/tests/fixtures/fpm';
        $asRoot = posix_geteuid() === 0;

        $params = '';
        foreach ([
            'QUERY_STRING' => '$query_string', 'REQUEST_METHOD' => '$request_method',
            'CONTENT_TYPE' => '$content_type', 'CONTENT_LENGTH' => '$content_length',
            'SCRIPT_NAME' => '/index.php', 'REQUEST_URI' => '$request_uri', 'DOCUMENT_URI' => '$document_uri',
            'SERVER_PROTOCOL' => '$server_protocol', 'GATEWAY_INTERFACE' => 'CGI/1.1',
            'REMOTE_ADDR' => '$remote_addr', 'REMOTE_PORT' => '$remote_port', 'SERVER_ADDR' => '$server_addr',
            'SERVER_PORT' => '$server_port', 'SERVER_NAME' => '$server_name',
            'SCRIPT_FILENAME' => "$app/index.php",
        ] as $k => $v) {
            $params .= "            fastcgi_param $k $v;\n";
        }
        $nginxUser = $asRoot ? 'user root;' : '';
        file_put_contents("$d/nginx.conf", <<<CONF
            $nginxUser
            daemon off;
            master_process on;
            worker_processes 1;
            pid $d/nginx.pid;
            error_log $d/nginx-error.log warn;
            events { worker_connections 512; }
            http {
                access_log off;
                client_body_temp_path $d/nginx-tmp/body;
                fastcgi_temp_path $d/nginx-tmp/fastcgi;
                proxy_temp_path $d/nginx-tmp/proxy;
                uwsgi_temp_path $d/nginx-tmp/uwsgi;
                scgi_temp_path $d/nginx-tmp/scgi;
                server {
                    listen 127.0.0.1:{$this->port};
                    fastcgi_read_timeout 60s;
                    location /solo/ {
                        fastcgi_pass unix:$d/solo.sock;
            $params
                    }
                    location / {
                        fastcgi_pass unix:$d/main.sock;
            $params
                    }
                }
            }
            CONF);
    }

    private function start(int $mainWorkers): void
    {
        $d = $this->dir;
        $env = ['RESILIENT_SIGNAL_DIR' => "$d/signal"];
        $this->fpm = FpmMaster::start($d, [
            'main' => ['workers' => $mainWorkers, 'env' => $env],
            'solo' => ['workers' => 1, 'env' => $env, 'ini' => ['resilient.web_timeout' => '4', 'resilient.context' => 'web']],
        ], $this->shmPath);
        $this->nginx = ServiceProcess::start(['nginx', '-p', $d, '-c', "$d/nginx.conf", '-e', "$d/nginx-error.log"], "$d/nginx");

        // Ready when both unix sockets exist and nginx answers through each pool.
        $end = microtime(true) + 15;
        while (microtime(true) < $end) {
            if (!$this->fpm->isRunning() || !$this->nginx->isRunning()) {
                break;
            }
            if (file_exists("$d/main.sock") && file_exists("$d/solo.sock")) {
                $a = Http::get($this->url('/?do=pid'), 1.0);
                $b = Http::get($this->url('/solo/?do=pid'), 1.0);
                if ($a->status === 200 && $b->status === 200) {
                    return;
                }
            }
            usleep(20_000);
        }
        $logs = $this->logs();
        $this->stop();
        throw new \RuntimeException("php-fpm/nginx did not come up on port {$this->port}:\n$logs");
    }

    public function url(string $pathAndQuery): string
    {
        return "http://127.0.0.1:{$this->port}$pathAndQuery";
    }

    /** The directory where fixture requests leave markers and wait for a release file. */
    public function signalDir(): string
    {
        return $this->dir . '/signal';
    }

    /** GET a fixture endpoint and decode its JSON answer. */
    public function getJson(string $pathAndQuery, float $timeout = 20.0): array
    {
        $r = Http::get($this->url($pathAndQuery), $timeout);
        $data = json_decode($r->body, true);
        if (!is_array($data)) {
            throw new \RuntimeException("GET $pathAndQuery: HTTP {$r->status}, not JSON: " . substr($r->body, 0, 2000) . "\n" . $this->logs());
        }
        return $data + ['_status' => $r->status];
    }

    /** Tail of every log, for failure messages. */
    public function logs(): string
    {
        $out = '';
        foreach (glob($this->dir . '/*.log') ?: [] as $f) {
            $text = (string) @file_get_contents($f);
            $out .= '--- ' . basename($f) . "\n" . substr($text, -3000) . "\n";
        }
        foreach (['fpm', 'nginx'] as $p) {
            $out .= "--- $p stderr\n" . substr((string) @file_get_contents("{$this->dir}/$p.err"), -2000) . "\n";
        }
        return $out;
    }

    public function stop(): void
    {
        $this->nginx?->stop();
        $this->fpm?->stop();
        $this->nginx = $this->fpm = null;
        if (self::$shared === $this) {
            self::$shared = null;
        }
    }
}
