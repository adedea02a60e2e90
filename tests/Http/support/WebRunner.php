<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;

/**
 * A small php-fpm of our own (FpmMaster: the extension loaded in the master, as in
 * production) that runs tests/Http/fixtures/call.php as a real web request over FastCGI (`cgi-fcgi`, no nginx needed).
 * Pool ini can be set per runner, e.g. `resilient.web_timeout`.
 */
final class WebRunner
{
    public readonly string $dir;
    private ServiceProcess $fpm;

    /** @param array<string,string> $poolIni php_admin_value[...] for the pool */
    public function __construct(array $poolIni = [], int $workers = 2)
    {
        $this->dir = Run::tempDir('webrunner');
        $d = $this->dir;
        $this->fpm = FpmMaster::start(
            $d,
            ['web' => ['workers' => $workers, 'ini' => $poolIni]],
            (string) ini_get('resilient.shm_path'),
        );
        $end = microtime(true) + 10;
        while (!file_exists("$d/web.sock")) {
            if (microtime(true) > $end || !$this->fpm->isRunning()) {
                throw new \RuntimeException('php-fpm did not start: ' . @file_get_contents("$d/fpm.err") . @file_get_contents("$d/fpm-error.log"));
            }
            usleep(10_000);
        }
    }

    public function stop(): void
    {
        $this->fpm->stop();
    }

    /** Runs call.php as a web request with `$spec`; returns its JSON answer. */
    public function call(array $spec, float $timeout = 30.0): array
    {
        $env = [
            'SCRIPT_FILENAME' => dirname(__DIR__) . '/fixtures/call.php',
            'SCRIPT_NAME' => '/call.php',
            'REQUEST_METHOD' => 'GET',
            'QUERY_STRING' => 'spec=' . rawurlencode(base64_encode(json_encode($spec))),
            'SERVER_PROTOCOL' => 'HTTP/1.1',
            'GATEWAY_INTERFACE' => 'CGI/1.1',
            'REMOTE_ADDR' => '127.0.0.1',
            'SERVER_NAME' => 'localhost',
            'SERVER_PORT' => '80',
            'PATH' => (string) getenv('PATH'),
        ];
        $proc = proc_open(['cgi-fcgi', '-bind', '-connect', "{$this->dir}/web.sock"], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, null, $env);
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
        $err = (string) stream_get_contents($pipes[2]);
        proc_close($proc);
        $body = substr($out, (int) strpos($out, "\r\n\r\n") + 4);
        $data = json_decode($body, true);
        if (!is_array($data)) {
            throw new \RuntimeException("web call: not JSON: " . substr($out, 0, 2000) . "\n$err\n" . @file_get_contents("{$this->dir}/php-error-web.log"));
        }
        return $data;
    }
}
