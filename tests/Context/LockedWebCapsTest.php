<?php

declare(strict_types=1);

namespace Resilient\Tests\Context;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Http\HttpTestCase;

/**
 * A web cap set with `php_admin_value` is a rule application code cannot lift: under php-fpm it
 * applies to every call of the request, also a client declared `'context' => 'console'` or one
 * made after `ini_set('resilient.context', 'console')`. Before, either lifted it (a web request
 * retried 3 times where the pool allowed 1). A cap set with `php_value` is the application's to
 * lift: a console-declared client keeps its own value (Octane-style declarations still work).
 */
final class LockedWebCapsTest extends HttpTestCase
{
    private static ?ServiceProcess $fpm = null;
    private static string $dir = '';

    public static function setUpBeforeClass(): void
    {
        self::$dir = Run::tempDir('locked-caps');
        self::$fpm = FpmMaster::start(self::$dir, ['web' => [
            'workers' => 1,
            'ini' => ['resilient.web_max_attempts' => '1'],
            'values' => ['resilient.web_timeout' => '1'],
        ]], (string) ini_get('resilient.shm_path'));
        $end = microtime(true) + 10;
        while (!file_exists(self::$dir . '/web.sock')) {
            if (microtime(true) > $end || !self::$fpm->isRunning()) {
                throw new \RuntimeException('php-fpm did not start: ' . @file_get_contents(self::$dir . '/fpm-error.log'));
            }
            usleep(10_000);
        }
    }

    public static function tearDownAfterClass(): void
    {
        self::$fpm?->stop();
        self::$fpm = null;
    }

    /** One web request running tests/Http/fixtures/call.php after `$iniSet`. */
    private function call(string $key, array $options, array $iniSet = []): array
    {
        $spec = ['name' => Run::name('locked'), 'path' => '/x', 'ini_set' => $iniSet, 'options' => $options + [
            'base_url' => $this->up->base($key),
            'max_attempts' => 3,
            'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'budget' => false,
        ]];
        $body = Fcgi::get(self::$dir . '/web.sock', __DIR__ . '/fixtures/call_after_ini_set.php', ['spec' => base64_encode(json_encode($spec))], 30.0);
        $answer = json_decode($body, true);
        $this->assertIsArray($answer, $body . @file_get_contents(self::$dir . '/php-error-web.log'));
        $this->assertSame('fpm-fcgi', $answer['sapi']);

        return $answer;
    }

    public function testALockedCapHoldsForAConsoleDeclaredClientAndAfterIniSet(): void
    {
        $key = $this->up->key('locked503');
        $this->up->script($key, [['status' => 503]]);
        $cases = [
            'the web context' => [[], []],
            "'context' => 'console'" => [['context' => 'console'], []],
            "ini_set('resilient.context', 'console')" => [[], ['resilient.context' => 'console']],
        ];
        $seen = 0;
        foreach ($cases as $case => [$options, $iniSet]) {
            $r = $this->call($key, $options, $iniSet)['results'][0];
            $this->assertSame('Resilient\\UpstreamFailed', $r['class'] ?? null, "$case: " . json_encode($r));
            $this->assertCount(1, $r['records'], "$case: php_admin_value[resilient.web_max_attempts] = 1 holds");
            $seen++;
            $this->assertCount($seen, $this->up->attempts($key, $seen), "$case: one attempt reached the upstream");
        }
    }

    public function testACapSetWithPhpValueIsLiftedByAConsoleDeclaredClient(): void
    {
        $key = $this->up->key('unlocked-slow');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 1500]]);
        $web = $this->call($key, ['timeout' => 30, 'max_attempts' => 1])['results'][0];
        $this->assertFalse($web['ok'], 'web: php_value[resilient.web_timeout] = 1 cuts the 1.5 s answer');
        $console = $this->call($key, ['timeout' => 30, 'max_attempts' => 1, 'context' => 'console'])['results'][0];
        $this->assertTrue($console['ok'], "'context' => 'console': its own 30 s timeout: " . json_encode($console));
        $this->assertGreaterThan(1400.0, $console['elapsed_ms']);
    }
}
