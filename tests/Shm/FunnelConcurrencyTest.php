<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Funnel;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 1: 8 concurrent CLI processes hammer Funnel('x', limit: 3) for a few seconds; the
 * number of leases held at once, counted outside the extension (a flock'ed counter file every
 * holder increments after tryAcquire() and decrements before release()), never exceeds 3, and all
 * slots are free at the end.
 */
final class FunnelConcurrencyTest extends TestCase
{
    private const PROCESSES = 8;
    private const LIMIT = 3;
    private const SECONDS = 3.0;

    public function testEightProcessesNeverHoldMoreThanTheLimit(): void
    {
        $name = Run::name('x');
        $dir = Run::tempDir('hammer');
        $counter = "$dir/counter";
        file_put_contents($counter, '0');

        $procs = [];
        for ($i = 0; $i < self::PROCESSES; $i++) {
            $procs[] = PhpProcess::script('funnel_hammer.php', [$name, self::LIMIT, self::SECONDS, $counter, $dir, $i]);
        }

        // Every hammer reports, then stays alive until told to exit.
        $this->waitFor(fn () => count(glob("$dir/*.json")) === self::PROCESSES, 60, 'all hammers to finish', 0.05);
        $reports = array_map(fn ($f) => json_decode(file_get_contents($f), true), glob("$dir/*.json"));

        // While all 8 processes are still alive (so no slot can come back as a dead pid's),
        // a fresh CLI process sees every slot free.
        $probe = PhpProcess::runScript('probe.php', ['in_flight', $name, self::LIMIT]);
        $inFlightWhileAlive = $probe->json()['in_flight'];
        touch("$dir/exit");
        foreach ($procs as $p) {
            $r = $p->wait(30);
            $this->assertSame(0, $r->exitCode, $r->describe());
        }

        $maxSeen = max(array_column($reports, 'max_seen'));
        $acquired = array_sum(array_column($reports, 'acquired'));
        $refused = array_sum(array_column($reports, 'refused'));
        fwrite(STDERR, sprintf("\n[funnel hammer] %d processes, %.0f s: %d leases, %d refusals, max held at once %d\n",
            self::PROCESSES, self::SECONDS, $acquired, $refused, $maxSeen));

        $this->assertLessThanOrEqual(self::LIMIT, $maxSeen, 'more leases were held at once than the limit');
        // The test could only fail if the funnel was really contended: it was full sometimes...
        $this->assertSame(self::LIMIT, $maxSeen, 'the limit was never reached: the test did not contend the funnel');
        $this->assertGreaterThan(0, $refused, 'no tryAcquire() was ever refused');
        $this->assertGreaterThan(100, $acquired);
        // ...and the independent counter is back to zero, as is the funnel.
        $this->assertSame('0', trim(file_get_contents($counter)));
        $this->assertSame(0, min(array_column($reports, 'min_seen')));
        $this->assertSame(0, $inFlightWhileAlive, 'slots still held after every holder released');
        $this->assertSame(0, (new Funnel($name, limit: self::LIMIT))->inFlight());
    }
}
