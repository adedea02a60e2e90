<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * A signal handled while a call blocks (pcntl_async_signals: Laravel's worker enforces a job's
 * `$timeout` with `pcntl_alarm`) runs during the call, not after it: a handler that returns lets
 * the call go on; one that throws ends the call with its exception (the funnel slot given back);
 * `exit()` in it ends the process with its status. Measured in a child process against a
 * hanging upstream: when the handler ran, when the call ended, what the upstream saw.
 */
final class SignalTest extends HttpTestCase
{
    private function child(string $key, string $handler, float $timeout): array
    {
        $name = Run::name('sig');
        $code = <<<PHP
            pcntl_async_signals(true);
            \$t0 = microtime(true); \$ran = null;
            pcntl_signal(SIGALRM, function () use (&\$ran, \$t0) { \$ran = microtime(true) - \$t0; $handler });
            pcntl_alarm(1);
            \$c = new Resilient\\Client('$name', ['base_url' => '{$this->up->base($key)}', 'timeout' => $timeout,
                'max_attempts' => 1, 'funnel' => ['limit' => 2], 'budget' => false]);
            try { \$c->get('/hang'); \$outcome = 'response'; } catch (Throwable \$e) { \$outcome = get_class(\$e) . ': ' . \$e->getMessage(); }
            echo json_encode(['handler_s' => \$ran, 'call_s' => microtime(true) - \$t0, 'outcome' => \$outcome,
                'in_flight' => (new Resilient\\Funnel('$name', 2))->inFlight()]);
            PHP;
        $r = PhpProcess::runCode($code, [], 20.0);

        return ['exit' => $r->exitCode, 'stdout' => $r->stdout, 'json' => json_decode($r->stdout, true)];
    }

    public function testAHandlerRunsDuringTheCallAndTheCallGoesOn(): void
    {
        $key = $this->up->key('sigrun');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]]);
        $out = $this->child($key, '', 2.5)['json'];
        $this->assertNotNull($out['handler_s'], 'the handler ran');
        $this->assertLessThan(1.8, $out['handler_s'], 'during the call, not after it');
        $this->assertGreaterThan(2.4, $out['call_s'], 'the call went on to its own timeout');
        $this->assertStringStartsWith('Resilient\UpstreamFailed', $out['outcome']);
    }

    public function testAHandlerThatThrowsEndsTheCallWithItsException(): void
    {
        $key = $this->up->key('sigthrow');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]]);
        $out = $this->child($key, 'throw new RuntimeException("job timed out");', 8.0)['json'];
        $this->assertSame('RuntimeException: job timed out', $out['outcome']);
        $this->assertLessThan(3.0, $out['call_s'], 'ended by the handler, not by the 8 s timeout');
        $this->assertSame(0, $out['in_flight'], 'the funnel slot was given back');
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    public function testExitInAHandlerEndsTheProcessWithItsStatus(): void
    {
        $key = $this->up->key('sigexit');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]]);
        $started = microtime(true);
        $out = $this->child($key, 'exit(3);', 8.0);
        $this->assertSame(3, $out['exit'], $out['stdout']);
        $this->assertSame('', $out['stdout'], 'nothing after the call ran');
        $this->assertLessThan(4.0, microtime(true) - $started);
    }
}
