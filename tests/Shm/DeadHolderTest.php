<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Funnel;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 3: a holder killed with SIGKILL gets its slot back — at once through dead-pid
 * reclaim, at worst when its lease expires. The waits poll inFlight() and are bounded; the
 * lease is long (60 s) so a quick return can only be the dead-pid reclaim.
 */
final class DeadHolderTest extends TestCase
{
    public function testSigkilledHoldersSlotComesBackAtOnce(): void
    {
        $name = Run::name('killed');
        $release = Run::tempDir('kill') . '/release';
        $holder = PhpProcess::script('holder.php', [$name, 1, 0, 60.0, 1, $release, 60]);
        $this->assertTrue($holder->waitForOutput(fn ($o) => str_contains($o, '"got"'), 15), 'holder did not start');
        $this->assertSame(1, json_decode($holder->stdoutSoFar(), true)['got']);

        $funnel = new Funnel($name, limit: 1);
        $this->assertSame(1, $funnel->inFlight(), 'this process should see the holder\'s lease');
        $this->assertNull($funnel->tryAcquire(), 'the funnel of limit 1 is held by the other process');

        $holder->signal(SIGKILL);
        $r = $holder->wait(10);
        $this->assertSame(SIGKILL, $r->signal);

        [, $waited] = $this->waitFor(fn () => $funnel->inFlight() === 0, 5.0, 'the dead holder\'s slot to come back');
        fwrite(STDERR, sprintf("\n[dead pid] slot back %.0f ms after the holder died (lease 60 s)\n", $waited * 1000));
        $this->assertLessThan(5.0, $waited);

        $lease = $funnel->tryAcquire();
        $this->assertNotNull($lease, 'the reclaimed slot can be taken');
        $lease->release();
    }

    /**
     * A holder that is alive but stuck (SIGSTOP) keeps its slot until the lease expires, then the
     * slot comes back; when the stuck holder later wakes up and releases its stale lease, it must
     * not free the slot someone else holds now.
     */
    public function testStuckHoldersSlotComesBackAtLeaseExpiryAndItsLateReleaseFreesNothing(): void
    {
        $name = Run::name('stuck');
        $release = Run::tempDir('stuck') . '/release';
        $leaseSeconds = 0.8;
        $holder = PhpProcess::script('holder.php', [$name, 1, 0, $leaseSeconds, 1, $release, 30]);
        $this->assertTrue($holder->waitForOutput(fn ($o) => str_contains($o, '"got"'), 15), 'holder did not start');
        $got = json_decode($holder->stdoutSoFar(), true);
        $this->assertSame(1, $got['got']);
        $acquiredAt = $got['before_acquire']; // the holder's clock before its acquire: no later than it
        $holder->signal(SIGSTOP);

        $funnel = new Funnel($name, limit: 1);
        $this->assertSame(1, $funnel->inFlight(), 'a live holder keeps its slot before the lease expires');

        $this->waitFor(fn () => $funnel->inFlight() === 0, 10.0, 'the expired lease to be reclaimed');
        $sinceAcquire = microtime(true) - $acquiredAt;
        fwrite(STDERR, sprintf("\n[lease expiry] slot back %.0f ms after acquire (lease %.0f ms)\n", $sinceAcquire * 1000, $leaseSeconds * 1000));
        $this->assertGreaterThanOrEqual($leaseSeconds * 0.9, $sinceAcquire, 'slot came back before the lease expired');

        $mine = $funnel->tryAcquire();
        $this->assertNotNull($mine);

        // Wake the stuck holder and let it release its stale lease.
        touch($release);
        $holder->signal(SIGCONT);
        $r = $holder->wait(15);
        $this->assertSame(0, $r->exitCode, $r->describe());

        $this->assertSame(1, $funnel->inFlight(), 'a stale lease\'s release() freed a slot held by someone else');
        $this->assertNull($funnel->tryAcquire());
        $mine->release();
        $this->assertSame(0, $funnel->inFlight());
    }
}
