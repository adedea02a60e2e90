<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * Must show 8: under real php-fpm a web request gets the web caps (attempt timeout ≤
 * resilient.web_timeout, connect ≤ web_connect_timeout, attempts ≤ web_max_attempts, i.e. no
 * retry by default); the same client in CLI (a queue worker) retries with its configured values.
 * The messages name the caps, which the client's options do not show.
 */
final class WebCapsTest extends HttpTestCase
{
    private static ?WebRunner $web = null;

    public static function setUpBeforeClass(): void
    {
        self::$web = new WebRunner(['resilient.web_timeout' => '1']);
    }

    public static function tearDownAfterClass(): void
    {
        self::$web?->stop();
        self::$web = null;
    }

    private function spec(string $key, array $options = []): array
    {
        return [
            'name' => Run::name('web'),
            'options' => $options + [
                'base_url' => $this->up->base($key),
                'timeout' => 30,
                'connect_timeout' => 10,
                'max_attempts' => 3,
                'backoff' => ['base' => 0.001, 'cap' => 0.002],
            ],
            'path' => '/x',
        ];
    }

    public function testAWebRequestDoesNotRetryButTheSameClientInCliDoes(): void
    {
        $key = $this->up->key('web503');
        $this->up->script($key, [['status' => 503]]);

        $web = self::$web->call($this->spec($key));
        $this->assertSame('fpm-fcgi', $web['sapi']);
        $this->assertTrue($web['is_web']);
        $this->assertFalse($web['results'][0]['ok']);
        $this->assertSame('Resilient\\UpstreamFailed', $web['results'][0]['class']);
        $this->assertCount(1, $web['results'][0]['records'], 'web: no retry');
        $this->assertStringContainsString('max_attempts (1, capped by resilient.web_max_attempts) reached', $web['results'][0]['message'], 'the message says where the 1 comes from');
        $this->assertCount(1, $this->up->attempts($key, 1));

        $cli = PhpProcess::script(__DIR__ . '/fixtures/call.php', [base64_encode(json_encode($this->spec($key)))])->wait(20.0)->json();
        $this->assertSame('cli', $cli['sapi']);
        $this->assertFalse($cli['is_web']);
        $this->assertCount(3, $cli['results'][0]['records'], 'cli: the configured 3 attempts');
        $this->assertCount(4, $this->up->attempts($key, 4));
    }

    public function testAWebRequestGetsTheWebTimeoutCap(): void
    {
        $key = $this->up->key('webhang');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]]);
        $web = self::$web->call($this->spec($key));
        $r = $web['results'][0];
        $this->assertFalse($r['ok']);
        $this->assertSame('timeout', $r['records'][0]['error']);
        $this->assertStringContainsString('the attempt timed out after 1s, cut to resilient.web_timeout', $r['message']);
        // timeout => 30 was asked for; this pool's resilient.web_timeout = 1 wins.
        $this->assertGreaterThanOrEqual(990.0, $r['elapsed_ms']);
        $this->assertLessThan(2000.0, $r['elapsed_ms'], 'the 1 s cap, not the 30 s asked for');
    }
}
