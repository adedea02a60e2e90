<?php

declare(strict_types=1);

namespace Resilient\Tests\Deadline;

use Resilient\Deadline;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 5 (CLI part): Deadline::within() nests (the earlier deadline wins), restores the
 * outer one on return and on exceptions, and leaves nothing behind. The FPM part — a worker's
 * next request sees no deadline — is in tests/Fpm/RequestEndTest.php.
 */
final class DeadlineTest extends TestCase
{
    public function testNoDeadlineOutsideWithin(): void
    {
        $this->assertNull(Deadline::remaining());
    }

    public function testWithinReturnsTheCallablesValueAndCountsDown(): void
    {
        [$first, $later, $ret] = Deadline::within(2.0, function () {
            $first = Deadline::remaining();
            usleep(200_000);
            return [$first, Deadline::remaining(), 'value'];
        });
        $this->assertSame('value', $ret);
        $this->assertGreaterThan(1.5, $first);
        $this->assertLessThanOrEqual(2.0, $first);
        $this->assertLessThanOrEqual($first - 0.19, $later, 'remaining() must count down with the clock');
        $this->assertNull(Deadline::remaining());
    }

    public function testInnerShorterDeadlineWinsAndOuterIsRestored(): void
    {
        [$inner, $afterInner] = Deadline::within(10.0, fn () => [
            Deadline::within(1.0, fn () => Deadline::remaining()),
            Deadline::remaining(),
        ]);
        $this->assertLessThanOrEqual(1.0, $inner);
        $this->assertGreaterThan(9.0, $afterInner, 'the outer deadline must be back after the inner within()');
        $this->assertNull(Deadline::remaining());
    }

    public function testInnerLongerDeadlineCannotExtendTheOuterOne(): void
    {
        $inner = Deadline::within(1.0, fn () => Deadline::within(10.0, fn () => Deadline::remaining()));
        $this->assertLessThanOrEqual(1.0, $inner, 'the earlier (outer) deadline must win');
        $this->assertGreaterThan(0.5, $inner);
    }

    public function testOuterDeadlineRestoredWhenTheInnerCallableThrows(): void
    {
        $thrown = new \DomainException('inner failed');
        $after = Deadline::within(10.0, function () use ($thrown) {
            try {
                Deadline::within(0.5, function () use ($thrown) {
                    throw $thrown;
                });
                $this->fail('the exception must propagate out of within()');
            } catch (\DomainException $e) {
                $this->assertSame($thrown, $e, 'within() must rethrow the very same exception');
            }
            return Deadline::remaining();
        });
        $this->assertGreaterThan(9.0, $after);
        $this->assertNull(Deadline::remaining());
    }

    public function testNothingLeftWhenAnExceptionEscapesEveryLevel(): void
    {
        try {
            Deadline::within(5.0, fn () => Deadline::within(3.0, fn () => Deadline::within(1.0, function () {
                throw new \RuntimeException('out');
            })));
            $this->fail('expected the exception');
        } catch (\RuntimeException $e) {
            $this->assertSame('out', $e->getMessage());
        }
        $this->assertNull(Deadline::remaining());
    }

    /** A scope entered in a Fiber that suspends does not bound the code outside it. */
    public function testAFibersScopeStaysWithTheFiber(): void
    {
        $fiber = new \Fiber(fn () => Deadline::within(0.001, fn () => \Fiber::suspend()));
        $fiber->start();
        $this->assertNull(Deadline::remaining(), 'outside the suspended Fiber');
        $this->assertSame(0.3, Deadline::cap(0.3));
        $fiber->resume();
        $this->assertTrue($fiber->isTerminated());
        $this->assertNull(Deadline::remaining());
    }

    /** A Fiber starts with the scopes in force where it starts, and keeps its own while suspended. */
    public function testAFiberStartsWithTheEnclosingScopesAndKeepsItsOwn(): void
    {
        [$outside, [$atStart, $inner, $afterInner]] = Deadline::within(5.0, function () {
            $fiber = new \Fiber(function () {
                $atStart = Deadline::remaining();
                $inner = Deadline::within(0.2, function () {
                    \Fiber::suspend();
                    return Deadline::remaining();
                });
                return [$atStart, $inner, Deadline::remaining()];
            });
            $fiber->start();
            $outside = Deadline::remaining();
            $fiber->resume();
            return [$outside, $fiber->getReturn()];
        });
        $this->assertGreaterThan(4.0, $outside, "the Fiber's 0.2 s scope stays in the Fiber");
        $this->assertGreaterThan(4.0, $atStart, 'inherited from where it started');
        $this->assertLessThanOrEqual(0.2, $inner, 'its own scope, back after the resume');
        $this->assertGreaterThan(4.0, $afterInner);
        $this->assertNull(Deadline::remaining());
    }

    /**
     * A scope a Fiber inherited bounds it while the within() that entered it runs, not after:
     * a long-lived Fiber (an event loop's, first started inside one request's or job's deadline)
     * is not held to that deadline for the rest of the worker's life, nor is a scope of its own
     * entered later cut by it. Before, the Fiber's calls failed at once with DeadlineExceeded.
     */
    public function testAFibersInheritedScopeEndsWithItsWithin(): void
    {
        $loop = new \Fiber(function () {
            while (true) {
                \Fiber::suspend([Deadline::remaining(), Deadline::within(30.0, fn () => Deadline::remaining())]);
            }
        });
        [$first, $firstOwn] = Deadline::within(0.05, fn () => $loop->start());
        $this->assertLessThanOrEqual(0.05, $first, 'bounded while the scope is open');
        $this->assertLessThanOrEqual(0.05, $firstOwn, 'an inner scope only shortens');
        usleep(60_000);
        [$later, $laterOwn] = $loop->resume();
        $this->assertNull($later, 'the scope ended: the Fiber is no longer in it');
        $this->assertGreaterThan(29.0, $laterOwn, 'its own scope, not cut by the ended one');
        [$again] = Deadline::within(5.0, fn () => $loop->resume());
        $this->assertNull($again, 'a Fiber keeps its own scopes where it is resumed (as before)');
    }

    public function testCap(): void
    {
        $this->assertSame(30.0, Deadline::cap(30.0), 'without a deadline cap() returns its argument');
        $capped = Deadline::within(2.0, fn () => [Deadline::cap(30.0), Deadline::cap(0.5)]);
        $this->assertLessThanOrEqual(2.0, $capped[0]);
        $this->assertGreaterThan(1.5, $capped[0]);
        $this->assertSame(0.5, $capped[1]);

        $expired = Deadline::within(0.05, function () {
            usleep(120_000);
            return [Deadline::remaining(), Deadline::cap(30.0)];
        });
        $this->assertLessThanOrEqual(0.0, $expired[0], 'remaining() after expiry is not positive');
        $this->assertGreaterThan(0.0, $expired[1], 'cap() never goes below a small positive floor');
        $this->assertLessThan(0.5, $expired[1]);
    }
}
