<?php

declare(strict_types=1);

namespace Resilient\Tests\Api;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * A Funnel::run() callable that calls run() again without end (a fallback that retries
 * through the full funnel) recursed until the C stack overflowed: a SIGSEGV at about 4,500
 * levels. The stack left is now checked on entry, as Deadline::within and the client do: a
 * clear \Error, the lease given back on the way out, and the process carries on. Runs in a
 * child process so a crash shows as a signal.
 */
final class FunnelRunNestingTest extends TestCase
{
    public function testRunawayRecursionIsAClearErrorAndTheProcessCarriesOn(): void
    {
        $name = 'run-nesting-' . getmypid();
        $code = sprintf('
            $f = new Resilient\Funnel(%s, 1, 0, 30.0);
            $held = $f->tryAcquire(false);
            function r($f) { return $f->run(fn () => 1, fn () => r($f)); }
            try { $r = ["returned" => r($f)]; }
            catch (Throwable $e) { $r = ["class" => get_class($e), "message" => $e->getMessage()]; }
            $r["in_flight"] = $f->inFlight();
            $held = null;
            $r["after"] = $f->run(fn () => "ok");
            echo json_encode($r);', var_export($name, true));
        $res = PhpProcess::runCode($code, [], 60);
        $this->assertNull($res->signal, 'Funnel::run recursion crashed PHP: ' . $res->describe());
        $this->assertSame(0, $res->exitCode, $res->describe());
        $r = $res->json();
        $this->assertSame('Error', $r['class'] ?? null, json_encode($r));
        $this->assertStringStartsWith('Funnel::run: only ', $r['message']);
        $this->assertStringContainsString('KB of C stack left', $r['message']);
        $this->assertSame(1, $r['in_flight'], 'only the lease held before is in flight');
        $this->assertSame('ok', $r['after']);
    }
}
