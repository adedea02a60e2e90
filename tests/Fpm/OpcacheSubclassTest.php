<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * A user class extending `Resilient\Client`, compiled once by opcache and shared by every
 * worker of the pool: the methods it inherits are copies of the extension's, their parameter
 * attributes (`#[\SensitiveParameter]`) included. Those must be the master's, made before the
 * fork: made in the worker that compiled the class, the other workers followed a pointer into
 * that worker's heap (SIGSEGV, or the secrets back in the trace).
 */
final class OpcacheSubclassTest extends TestCase
{
    private ?ServiceProcess $fpm = null;

    protected function tearDown(): void
    {
        $this->fpm?->stop();
    }

    public function testASubclassSharedByOpcacheKeepsItsSensitiveParametersInEveryWorker(): void
    {
        $dir = Run::tempDir('opcache-subclass');
        mkdir("$dir/docs");
        file_put_contents("$dir/docs/api.php", "<?php\nclass Api extends Resilient\\Client {}\n");
        file_put_contents("$dir/docs/index.php", <<<'PHP'
            <?php
            require __DIR__ . '/api.php';
            ini_set('zend.exception_ignore_args', '0');
            header('Content-Type: application/json');
            try {
                (new Api('opcache-subclass', ['base_url' => 'http://u:s3cr3tPw@127.0.0.1:9']))
                    ->get('/p?api_key=s3cr3tPw', ['q' => 's3cr3tPw'], ['timout' => 1]);
                echo json_encode(['pid' => getmypid(), 'threw' => false]);
            } catch (\Throwable $e) {
                $frame = $e->getTrace()[0];
                echo json_encode([
                    'pid' => getmypid(),
                    'opcache' => (opcache_get_status(false)['opcache_enabled'] ?? false),
                    'at' => ($frame['class'] ?? '') . '::' . $frame['function'],
                    'args' => array_map(fn ($a) => is_object($a) ? get_class($a) : $a, $frame['args'] ?? []),
                ]);
            }
            PHP);
        $this->fpm = FpmMaster::start(
            $dir,
            ['w' => ['workers' => 3]],
            Run::shmPath('opcache-subclass'),
            // The system's php.ini and conf.d, as a production pool runs: opcache and the other
            // extensions (their allocations make each worker's heap its own).
            // (opcache.file_update_protection: cache the files just written)
            masterIni: ['opcache.enable' => '1', 'opcache.file_update_protection' => '0'],
            systemIni: true,
        );
        $this->waitFor(fn () => file_exists("$dir/w.sock") ?: null, 15.0, 'the pool socket');
        $pids = [];
        for ($i = 0; $i < 24; $i++) {
            $body = Fcgi::get("$dir/w.sock", "$dir/docs/index.php");
            $out = json_decode($body, true);
            $this->assertIsArray($out, "request $i: " . $body . "\n" . @file_get_contents("$dir/fpm-error.log"));
            $this->assertTrue($out['opcache'], 'opcache serves the script');
            $this->assertSame('Resilient\\Client::get', $out['at']);
            $this->assertSame(array_fill(0, 3, \SensitiveParameterValue::class), $out['args'], "request $i, worker {$out['pid']}");
            $pids[$out['pid']] = true;
        }
        $log = (string) @file_get_contents("$dir/fpm-error.log");
        $this->assertStringNotContainsString('signal', $log, 'no worker died');
        $this->assertStringNotContainsString('already loaded', $log . @file_get_contents("$dir/fpm.err"), 'the build under test, not an installed one');
        $this->assertGreaterThan(1, count($pids), 'more than one worker ran the shared class');
    }
}
