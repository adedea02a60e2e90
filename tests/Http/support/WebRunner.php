<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

use Resilient\Tests\Harness\Fcgi;
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
        $body = Fcgi::get(
            "{$this->dir}/web.sock",
            dirname(__DIR__) . '/fixtures/call.php',
            ['spec' => base64_encode(json_encode($spec))],
            $timeout,
        );
        $data = json_decode($body, true);
        if (!is_array($data)) {
            throw new \RuntimeException("web call: not JSON: " . substr($body, 0, 2000) . "\n" . @file_get_contents("{$this->dir}/php-error-web.log"));
        }
        return $data;
    }
}
