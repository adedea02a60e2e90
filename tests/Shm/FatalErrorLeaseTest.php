<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\ProcessResult;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A lease whose holder a fatal error skipped is given back before the shutdown functions run.
 * It was given back at request end, after them, so a shutdown function that reports the error
 * to the same upstream (Laravel's `HandleExceptions::handleShutdown` does its reporting there)
 * found the funnel full of the dead code's slot. An error a handler takes does not end the
 * code, and its leases stay held.
 */
final class FatalErrorLeaseTest extends TestCase
{
    /** @return iterable<string,array{string}> code run while `$f`'s only slot is held by `$l` */
    public static function fatalErrors(): iterable
    {
        yield 'E_USER_ERROR' => ['trigger_error("boom", E_USER_ERROR);'];
        yield 'undefined function (E_ERROR)' => ['undefined_function_for_a_fatal_error();'];
        yield 'max_execution_time' => ['set_time_limit(1); $x = 0; while (true) { $x++; }'];
        yield 'memory exhaustion' => ['ini_set("memory_limit", "8M"); $s = str_repeat("x", 64 << 20);'];
    }

    /** @dataProvider fatalErrors */
    public function testALeaseAFatalErrorSkippedIsFreeForShutdownFunctions(string $fatal): void
    {
        foreach (['a function' => 'work($f);', 'Deadline::within' => 'Resilient\Deadline::within(30.0, fn () => work($f));'] as $where => $call) {
            $out = $this->runUntilShutdown($fatal, $call);
            $this->assertSame(['in_flight' => 0, 'acquired' => true], $out, "held in $where");
        }
    }

    /** A Lease object a shutdown function still reaches says it is no longer held. */
    public function testALeaseObjectReleasedByAFatalErrorSaysSo(): void
    {
        $r = $this->shutdownSees('$GLOBALS["lease"] = $f->tryAcquire(); register_shutdown_function(function () {
            echo "\nLEASE ", json_encode([$GLOBALS["lease"]->isHeld(), $GLOBALS["lease"]->release()]), "\n"; });
            trigger_error("boom", E_USER_ERROR);');
        $this->assertStringContainsString("\nLEASE [false,false]\n", $r->stdout, $r->describe());
    }

    public function testALeaseOfCodeThatGoesOnAfterAHandledErrorStaysHeld(): void
    {
        $out = $this->runUntilShutdown('set_error_handler(fn () => true); trigger_error("handled", E_USER_ERROR); echo "\nGOES ON ", $f->inFlight(), "\n";', 'work($f);', 'GOES ON 1');
        $this->assertSame(['in_flight' => 0, 'acquired' => true], $out, 'released when its frame ended');
    }

    /**
     * Fibers: what a suspended Fiber took stays with it (a shutdown function may resume it);
     * what Fibers resuming one another took, or a Fiber that has ended, is given back.
     *
     * @return iterable<string,array{string,int}> code (`$f` is a funnel of limit 2), the leases
     *     the shutdown function sees held
     */
    public static function fiberCases(): iterable
    {
        $take = '$l = $f->tryAcquire() ?? exit(3);';
        yield 'in a Fiber that another Fiber resumed' => ["(new Fiber(function () use (\$f) { $take (new Fiber(function () use (\$f) { $take trigger_error('boom', E_USER_ERROR); }))->start(); }))->start();", 0];
        yield 'by a Fiber that has ended' => ["\$fiber = new Fiber(function () use (\$f) { $take return \$l; }); \$fiber->start(); \$kept = \$fiber->getReturn(); trigger_error('boom', E_USER_ERROR);", 0];
        yield 'by a Fiber that has ended, whose address a suspended one took' => ["\$fiber = new Fiber(function () use (\$f) { $take return \$l; }); \$fiber->start(); \$kept = \$fiber->getReturn(); unset(\$fiber); \$GLOBALS['other'] = new Fiber(fn () => Fiber::suspend()); \$GLOBALS['other']->start(); trigger_error('boom', E_USER_ERROR);", 0];
        yield 'by a Fiber ended by an uncaught exception' => ["(new Fiber(function () use (\$f) { \$GLOBALS['kept'] = \$f->tryAcquire() ?? exit(3); throw new RuntimeException('boom'); }))->start();", 0];
        yield 'by a suspended Fiber' => ["\$GLOBALS['fiber'] = new Fiber(function () use (\$f) { $take Fiber::suspend(); }); \$GLOBALS['fiber']->start(); $take trigger_error('boom', E_USER_ERROR);", 1];
    }

    /** @dataProvider fiberCases */
    public function testAFatalErrorLeavesASuspendedFibersLeasesOnly(string $code, int $held): void
    {
        $r = $this->shutdownSees($code, 2);
        $this->assertSame(1, preg_match('/^SHUTDOWN (.*)$/m', $r->stdout, $m), $r->describe());
        $this->assertSame($held, json_decode($m[1], true)['in_flight'], $r->describe());
    }

    /** Runs `$code` with `$f`, a funnel of limit `$limit`; the shutdown function prints a line. */
    private function shutdownSees(string $code, int $limit = 1): ProcessResult
    {
        $path = Run::shmPath('fatal-' . bin2hex(random_bytes(3)));
        $code = sprintf('
            $f = new Resilient\Funnel("fatal", %d);
            register_shutdown_function(function () use ($f) {
                echo "\nSHUTDOWN ", json_encode(["in_flight" => $f->inFlight(), "acquired" => $f->tryAcquire() !== null]), "\n";
            });
            %s', $limit, $code);
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8'], 20);
        @unlink($path);
        return $r;
    }

    /** @return array{in_flight:int,acquired:bool} what the shutdown function saw */
    private function runUntilShutdown(string $fatal, string $call, ?string $alsoPrinted = null): array
    {
        $r = $this->shutdownSees(sprintf('
            function work($f) { $l = $f->tryAcquire(); if ($l === null) { exit(3); } %s }
            %s', $fatal, $call));
        if ($alsoPrinted !== null) {
            $this->assertStringContainsString($alsoPrinted, $r->stdout, $r->describe());
        }
        $this->assertSame(1, preg_match('/^SHUTDOWN (.*)$/m', $r->stdout, $m), $r->describe());
        return json_decode($m[1], true);
    }
}
