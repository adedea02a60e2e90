<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The @internal bench helpers (`Funnel::learnSynthetic`, `Metrics::recordSynthetic`,
 * `Client::benchBackend`) run up to a billion rounds in Rust in one call, about a minute: PHP
 * code cannot stop them between opcodes. They now look at PHP's interrupt flag as a call does:
 * `max_execution_time` ends them with its fatal error (the shutdown functions run), and a
 * signal's handler that throws ends them with its exception. Before, they ran to their end
 * whatever `set_time_limit(1)` said.
 */
final class LongInternalLoopsTest extends TestCase
{
    /** @return iterable<string,array{string}> */
    public static function loops(): iterable
    {
        yield 'learnSynthetic' => ['Resilient\Funnel::learnSynthetic(%s, 1_000_000_000, 0.02);'];
        yield 'recordSynthetic' => ['Resilient\Metrics::recordSynthetic(%s, 1_000_000_000);'];
        yield 'benchBackend' => ['Resilient\Client::benchBackend(%s, ["budget" => ["ratio" => 0.1]], "budget", 1_000_000_000);'];
    }

    /** @dataProvider loops */
    public function testTheTimeLimitEndsTheLoop(string $call): void
    {
        $code = 'register_shutdown_function(function () { echo "SHUTDOWN\n"; }); set_time_limit(1);'
            . sprintf($call, var_export(Run::name('long-loop'), true)) . ' echo "RETURNED\n";';
        $r = PhpProcess::runCode($code, [], 20.0);
        $this->assertFalse($r->timedOut, 'the loop ran on past the time limit: ' . $r->describe());
        $this->assertSame(255, $r->exitCode, $r->describe());
        $this->assertStringContainsString('Maximum execution time of 1 second exceeded', $r->stderr . $r->stdout);
        $this->assertSame("SHUTDOWN\n", $r->stdout, 'the shutdown functions ran, nothing after the call');
    }

    /** @dataProvider loops */
    public function testASignalHandlerThatThrowsEndsTheLoop(string $call): void
    {
        $code = 'pcntl_async_signals(true); pcntl_signal(SIGALRM, function () { throw new RuntimeException("alarm"); }); pcntl_alarm(1);'
            . 'try { ' . sprintf($call, var_export(Run::name('long-loop-signal'), true)) . ' echo "RETURNED\n"; }'
            . ' catch (RuntimeException $e) { echo "CAUGHT ", $e->getMessage(), "\n"; }';
        $r = PhpProcess::runCode($code, [], 20.0);
        $this->assertFalse($r->timedOut, 'the loop ran on past the signal: ' . $r->describe());
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame("CAUGHT alarm\n", $r->stdout);
    }
}
