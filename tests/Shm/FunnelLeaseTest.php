<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Funnel;
use Resilient\FunnelFull;
use Resilient\Lease;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Unavailable;

/**
 * The life of a lease in one CLI process: reserve for background callers (overridable per
 * call), release by release(), by destruction, by run() also when the callable throws, fail-fast
 * FunnelFull, and a forked child that cannot give back its parent's slot.
 */
final class FunnelLeaseTest extends TestCase
{
    public function testCliIsBackgroundAndMayOnlyUseLimitMinusReserve(): void
    {
        $f = new Funnel(Run::name('reserve'), limit: 3, reserve: 1);
        $held = [$f->tryAcquire(), $f->tryAcquire()];
        $this->assertNotContains(null, $held);
        $this->assertNull($f->tryAcquire(), 'a CLI caller gets limit - reserve = 2');
        $this->assertSame(2, $f->inFlight());

        $third = $f->tryAcquire(background: false);
        $this->assertInstanceOf(Lease::class, $third, 'background: false may use the reserved slot');
        $this->assertNull($f->tryAcquire(background: false), 'but never more than the limit');
        $this->assertSame(3, $f->inFlight());
    }

    /** README: one set of slots per name; each caller is let in under its own limit. */
    public function testOneNameWithTwoLimitsSharesTheSlotsEachCallerUnderItsOwnLimit(): void
    {
        $name = Run::name('two-limits');
        $four = new Funnel($name, limit: 4);
        $two = new Funnel($name, limit: 2);
        $held = [$four->tryAcquire(), $four->tryAcquire()];
        $this->assertNotContains(null, $held);
        $this->assertNull($two->tryAcquire(), 'the limit-2 caller counts the limit-4 caller\'s holders');
        $held[] = $four->tryAcquire();
        $held[] = $four->tryAcquire();
        $this->assertNotContains(null, $held);
        $this->assertNull($four->tryAcquire(), 'and the limit-4 caller stops at its own 4');
        $this->assertSame(4, $two->inFlight(), 'one count for the name');
        $held = [];
        $this->assertSame(0, $four->inFlight());
        $this->assertInstanceOf(Lease::class, $two->tryAcquire());
    }

    public function testReleaseIsIdempotentAndDestructionReleases(): void
    {
        $f = new Funnel(Run::name('release'), limit: 1);
        $lease = $f->tryAcquire();
        $this->assertTrue($lease->isHeld());
        $this->assertNull($f->tryAcquire());
        $this->assertTrue($lease->release());
        $this->assertFalse($lease->release(), 'a second release() gives back nothing');
        $this->assertFalse($lease->isHeld());
        $this->assertSame(0, $f->inFlight());

        $lease = $f->tryAcquire();
        $this->assertSame(1, $f->inFlight());
        unset($lease);
        $this->assertSame(0, $f->inFlight(), 'dropping the Lease object releases its slot');
    }

    public function testRunReleasesOnReturnAndOnExceptionAndFailsFastWhenFull(): void
    {
        $f = new Funnel(Run::name('run'), limit: 1);
        $this->assertSame('value', $f->run(function () use ($f) {
            $this->assertSame(1, $f->inFlight());
            return 'value';
        }));
        $this->assertSame(0, $f->inFlight());

        try {
            $f->run(fn () => throw new \DomainException('inside'));
            $this->fail('the exception must propagate');
        } catch (\DomainException $e) {
            $this->assertSame('inside', $e->getMessage());
        }
        $this->assertSame(0, $f->inFlight(), 'run() releases when the callable throws');

        $blocker = $f->tryAcquire();
        $this->assertSame('fallback', $f->run(fn () => 'never', fn () => 'fallback'));
        $start = hrtime(true);
        try {
            $f->run(fn () => 'never');
            $this->fail('a full funnel without fallback must throw FunnelFull');
        } catch (FunnelFull $e) {
            $this->assertInstanceOf(Unavailable::class, $e);
            $this->assertStringContainsString($f->name(), $e->getMessage(), 'the message names the funnel');
        }
        $this->assertLessThan(500_000_000, hrtime(true) - $start, 'full means fail fast, no waiting (the blocker is never released)');
        $blocker->release();
    }

    public function testForkedChildCannotReleaseItsParentsLease(): void
    {
        $f = new Funnel(Run::name('fork'), limit: 1);
        $lease = $f->tryAcquire();
        $this->assertNotNull($lease);

        $report = Run::tempDir('fork') . '/child.json';
        $pid = pcntl_fork();
        if ($pid === 0) {
            // Child: both explicit release and destruction must leave the parent's slot alone.
            $released = $lease->release();
            unset($lease);
            file_put_contents($report, json_encode(['released' => $released, 'in_flight' => $f->inFlight()]));
            posix_kill(getmypid(), SIGKILL); // skip PHPUnit's shutdown in the child
        }
        $this->assertGreaterThan(0, $pid);
        $end = microtime(true) + 10;
        while (pcntl_waitpid($pid, $status, WNOHANG) === 0 && microtime(true) < $end) {
            usleep(5_000);
        }
        $this->assertSame(['released' => false, 'in_flight' => 1], json_decode((string) @file_get_contents($report), true),
            'in the child, release() of the inherited lease must return false and free nothing');
        $this->assertSame(1, $f->inFlight(), 'the child gave back a slot it did not own');
        $this->assertTrue($lease->release());
        $this->assertSame(0, $f->inFlight());
    }

    public function testAChildForkedInsideRunCannotFreeTheParentsSlot(): void
    {
        $f = new Funnel(Run::name('forkrun'), limit: 1);
        $report = Run::tempDir('forkrun') . '/child.json';
        $seen = $f->run(function () use ($f, $report) {
            $pid = pcntl_fork();
            if ($pid === 0) {
                // The child leaves run() by exit: the guard it inherited must not release.
                register_shutdown_function(fn () => file_put_contents($report, json_encode(['in_flight' => $f->inFlight()])));
                exit(0);
            }
            pcntl_waitpid($pid, $status);
            return $f->inFlight();
        });
        $this->assertSame(['in_flight' => 1], json_decode((string) @file_get_contents($report), true));
        $this->assertSame(1, $seen, 'the parent still holds its slot after the child exited');
        $this->assertSame(0, $f->inFlight());
    }
}
