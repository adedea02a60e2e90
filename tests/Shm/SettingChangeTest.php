<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * `ini_set()` of a segment setting is seen by the objects a process already holds at their next
 * use, as by new ones (and `Metrics::segmentPath()`). A kept `Funnel` went on counting in the
 * old file for up to a second (the interval between its checks of the file).
 */
final class SettingChangeTest extends TestCase
{
    /**
     * A funnel of limit 1 and a budget of floor 1, each spent in file A; after the path moves
     * to B, both count in B (free, unspent), and after it moves back, in A again.
     */
    public function testKeptObjectsFollowTheSegmentPathAtOnce(): void
    {
        $a = Run::shmPath('setting-a-' . bin2hex(random_bytes(3)));
        $b = Run::shmPath('setting-b-' . bin2hex(random_bytes(3)));
        $code = sprintf('
            $f = new Resilient\Funnel("moved", 1);
            $budget = new Resilient\RetryBudget("moved", 0.0, 1, 60.0);
            $held = $f->tryAcquire();
            $budget->tryConsume();
            ini_set("resilient.shm_path", %2$s);
            $inB = ["path" => Resilient\Metrics::segmentPath(), "in_flight" => $f->inFlight(),
                "acquired" => ($l = $f->tryAcquire()) !== null, "retry" => $budget->tryConsume()];
            unset($l);
            ini_set("resilient.shm_path", %1$s);
            $inA = ["in_flight" => $f->inFlight(), "retry" => $budget->tryConsume()];
            echo json_encode(["b" => $inB, "a" => $inA, "held" => $held !== null]);', var_export($a, true), var_export($b, true));
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $a, 'resilient.shm_slots' => '8']);
        $out = $r->json();
        $this->assertTrue($out['held'], $r->describe());
        $this->assertSame(['path' => $b, 'in_flight' => 0, 'acquired' => true, 'retry' => true], $out['b'], 'counted in B at once');
        $this->assertSame(['in_flight' => 1, 'retry' => false], $out['a'], 'back in A, where the lease and the retry are');
        @unlink($a);
        @unlink($b);
    }

    /**
     * A process in the degraded mode (the file is not a segment) turns `resilient.shm_required`
     * on: its kept funnel throws `SharedMemoryError` at its next use, as a new one does, instead
     * of counting this process only for up to a second more.
     */
    public function testKeptObjectsFollowShmRequiredAtOnce(): void
    {
        $path = Run::shmPath('setting-required-' . bin2hex(random_bytes(3)));
        file_put_contents($path, str_repeat('not a segment ', 400));
        chmod($path, 0600);
        $code = '
            $f = new Resilient\Funnel("required", 1);
            $degraded = $f->isDegraded();
            ini_set("resilient.shm_required", "1");
            try { $f->tryAcquire(); $then = "counted"; } catch (Resilient\SharedMemoryError $e) { $then = "threw"; }
            echo json_encode([$degraded, $then]);';
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8']);
        $this->assertSame([true, 'threw'], $r->json(), $r->describe());
        @unlink($path);
    }
}
