<?php

declare(strict_types=1);

namespace Resilient\Tests\Deadline;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A bailout (fatal error) in one context must leave alone what a suspended Fiber holds: its
 * deadline scope and its funnel lease are still in use when a shutdown function resumes it.
 * Dropping them at the bailout was a use after free, then a double free when the Fiber ended.
 */
final class FiberBailoutTest extends TestCase
{
    /** @return array<string, array{string}> */
    public static function holders(): array
    {
        return ['Deadline::within' => ['within'], 'Funnel::run' => ['run']];
    }

    /** @dataProvider holders */
    public function testABailoutOutsideLeavesASuspendedFibersScopeAndLeaseToIt(string $where): void
    {
        $r = PhpProcess::runScript('fiber_bailout.php', [$where, Run::name('fiber-bailout')]);
        $this->assertNull($r->signal, $r->describe());
        $this->assertSame(255, $r->exitCode, 'the fatal error ends the script (and nothing else does): ' . $r->describe());
        $lines = explode("\n", trim($r->stdout));
        $this->assertSame(['suspended', 'shutdown'], array_slice($lines, 0, 2), $r->describe());
        $this->assertCount(3, $lines, $r->describe());
        $result = json_decode($lines[2], true, flags: JSON_THROW_ON_ERROR);
        if ($where === 'within') {
            $this->assertGreaterThan(25.0, $result['fiber']['remaining'], "the Fiber's scope is its own");
        } else {
            $this->assertSame(1, $result['fiber']['in_flight'], 'the Fiber still holds its lease');
        }
        $this->assertSame(0, $result['in_flight_after'], 'released when run() returned');
        $this->assertNull($result['remaining_outside'], 'no scope outside the Fiber');
        $this->assertStringNotContainsString('panicked', $r->stderr);
    }

    /**
     * A fatal error inside a Fiber resumed from the main context's Deadline::within ends that
     * scope too: the shutdown functions run under no deadline (the scope was popped from the
     * Fiber's stack instead, and the main context's expired one made every call in a shutdown
     * function fail at once with DeadlineExceeded). The lease the Fiber took in Funnel::run ends
     * with the Fiber, before the shutdown functions, as it does outside a Fiber (it was held
     * until the request's end).
     */
    public function testAFatalErrorInAFiberEndsTheMainContextsScopeAndTheFibersLease(): void
    {
        $r = PhpProcess::runScript('fiber_bailout.php', ['in_fiber', Run::name('fiber-bailout')]);
        $this->assertNull($r->signal, $r->describe());
        $this->assertSame(255, $r->exitCode, $r->describe());
        $this->assertStringContainsString('fatal in the Fiber', $r->stdout . $r->stderr);
        $lines = explode("\n", trim($r->stdout));
        $this->assertSame('suspended', $lines[0], $r->describe());
        $this->assertSame('{"remaining_in_shutdown":null,"in_flight_in_shutdown":0}', end($lines), $r->describe());
    }

    /**
     * A Fiber left suspended inside Funnel::run by a fatal error is never resumed: what it
     * holds is given back at request end. It was kept in a per-thread list until the process
     * exited, and dropping it then touched a list already torn down: a Rust panic during the
     * thread's teardown, and the process aborted (an FPM worker ended by SIGABRT).
     */
    public function testAFiberLeftSuspendedByAFatalErrorDoesNotAbortTheProcessAtExit(): void
    {
        $r = PhpProcess::runScript('fiber_bailout.php', ['left', Run::name('fiber-bailout')]);
        $this->assertNull($r->signal, $r->describe());
        $this->assertSame(255, $r->exitCode, $r->describe());
        $this->assertStringContainsString('fatal beside a suspended Fiber', $r->stdout . $r->stderr);
        $this->assertSame('suspended', strtok($r->stdout, "\n"), $r->describe());
        $this->assertStringNotContainsString('panicked', $r->stderr);
        $this->assertStringNotContainsString('fatal runtime error', $r->stderr);
    }
}
