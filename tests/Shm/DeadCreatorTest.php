<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A creator killed before it wrote the header used to leave a file on which
 * every process waited 1 s and threw "not initialised" until someone deleted it. Now the
 * initialiser holds an flock on the file while it works; the kernel drops the lock of a dead
 * process, and the next opener of the same user re-initialises the header-less file.
 *
 * The creator here is a PHP process doing what the extension's creator does up to its death:
 * O_EXCL create (fopen 'x'), flock, size the file and write entries, then it is killed (-9)
 * before the header.
 */
final class DeadCreatorTest extends TestCase
{
    private const USE_IT = '$t = microtime(true); $f = new Resilient\Funnel("dead", limit: 2); $l = $f->tryAcquire(background: false);
        return ["ms" => (int) ((microtime(true) - $t) * 1000), "degraded" => $f->isDegraded(), "reason" => Resilient\Funnel::degradedReason(), "in_flight" => $f->inFlight()];';

    /** Starts a "creator" that takes the lock, writes half a file and stops there. */
    private function creator(string $path): PhpProcess
    {
        $code = sprintf(
            '$h = fopen(%s, "x"); chmod(%1$s, 0600); flock($h, LOCK_EX); ftruncate($h, %2$d);
             fseek($h, 64); fwrite($h, str_repeat("\x5a", 8192)); fflush($h); echo "locked\n"; sleep(30);',
            var_export($path, true),
            Run::segmentSize(256),
        );
        $p = PhpProcess::code($code);
        $this->assertTrue($p->waitForOutput(fn ($o) => str_contains($o, 'locked'), 10.0), 'the creator did not start');
        return $p;
    }

    private function use(string $path, array $ini = []): array
    {
        $r = PhpProcess::runScript('expect_throw.php', [self::USE_IT], ['resilient.shm_path' => $path] + $ini, 20);
        $this->assertNull($r->signal, $r->describe());
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertFalse($out['threw'], json_encode($out));
        return $out['returned'];
    }

    public function testHeaderLessFileOfAKilledCreatorIsRecovered(): void
    {
        $path = Run::shmPath('dead-' . bin2hex(random_bytes(3)));
        $creator = $this->creator($path);
        $creator->signal(SIGKILL);
        $creator->wait(5);
        $this->assertSame("\0\0\0\0\0\0\0\0", file_get_contents($path, false, null, 0, 8), 'no magic: a header-less file');

        $out = $this->use($path, ['resilient.shm_required' => '1']);
        $this->assertFalse($out['degraded']);
        $this->assertSame(1, $out['in_flight']);
        $this->assertLessThan(500, $out['ms'], 'recovery must not wait for a dead creator');
        // The recovered file is a normal segment: a second process shares it.
        $again = $this->use($path, ['resilient.shm_required' => '1']);
        $this->assertFalse($again['degraded']);
        $this->assertSame(0600, fileperms($path) & 0777);
        fwrite(STDERR, sprintf("\n[dead creator] recovered in %d ms\n", $out['ms']));
    }

    /**
     * The real creator (the extension itself, 65536 slots = 50 MB to reserve), killed with -9 at
     * a random moment of its start-up, 20 times: whatever it left, the next process gets a working
     * shared segment (never "not initialised", never degraded, never a wait).
     */
    public function testTheRealCreatorKilledAtRandomMomentsNeverLeavesAnUnusableFile(): void
    {
        $outcomes = ['none' => 0, 'headerless' => 0, 'complete' => 0];
        for ($i = 0; $i < 20; $i++) {
            $path = Run::shmPath("kill-$i-" . bin2hex(random_bytes(3)));
            $ini = ['resilient.shm_path' => $path, 'resilient.shm_slots' => '65536', 'resilient.shm_required' => '1'];
            $creator = PhpProcess::code('new Resilient\Funnel("dead", limit: 2); echo "done\n"; sleep(30);', $ini);
            usleep(random_int(25_000, 80_000)); // PHP starts in about 40 ms, creating takes about 25
            $creator->signal(SIGKILL);
            $creator->wait(5);
            clearstatcache();
            $head = file_exists($path) ? (string) file_get_contents($path, false, null, 0, 8) : null;
            $outcomes[$head === null ? 'none' : ($head === 'RESILNT1' ? 'complete' : 'headerless')]++;
            $out = $this->use($path, $ini);
            $this->assertFalse($out['degraded'], json_encode($out));
            $this->assertSame(1, $out['in_flight']);
            $this->assertLessThan(1000, $out['ms'], json_encode($out));
            @unlink($path);
        }
        fwrite(STDERR, "\n[real creator killed x20] file left: " . json_encode($outcomes) . "\n");
    }

    public function testALiveButStuckCreatorIsWaitedForBoundedThenDegrades(): void
    {
        $path = Run::shmPath('stuck-' . bin2hex(random_bytes(3)));
        $creator = $this->creator($path);
        try {
            $out = $this->use($path);
            $this->assertTrue($out['degraded']);
            $this->assertStringContainsString('being initialised or opened by another process', $out['reason']);
            $this->assertGreaterThanOrEqual(1900, $out['ms']);
            $this->assertLessThan(5000, $out['ms']);
        } finally {
            $creator->signal(SIGKILL);
            $creator->wait(5);
        }
        // Once it is dead, the next process recovers the file.
        $out = $this->use($path, ['resilient.shm_required' => '1']);
        $this->assertFalse($out['degraded']);
    }

    /**
     * With `shm_required=1` there is no fallback to remember, and every use waited the whole
     * lock wait again (2 s per request under FPM). Now the first use waits; the next ones
     * within a second throw the same error at once, later ones try the file without waiting,
     * and the file is used as soon as its creator is gone.
     */
    public function testARequiredSegmentsStuckCreatorIsWaitedForOnceNotAtEveryUse(): void
    {
        $path = Run::shmPath('stuck-req-' . bin2hex(random_bytes(3)));
        $creator = $this->creator($path);
        $code = '$uses = [];
            foreach ([0, 0, 0, 1100, 0] as $pause) {
                usleep($pause * 1000);
                $t = microtime(true);
                try { (new Resilient\\Funnel("stuck", limit: 2))->tryAcquire(); $e = null; } catch (Resilient\\SharedMemoryError $e) {}
                $uses[] = ["ms" => (int) ((microtime(true) - $t) * 1000), "error" => $e?->getMessage()];
            }
            echo json_encode($uses), "\n";
            while (!file_exists(%s)) { usleep(10000); }   // the test kills the creator meanwhile
            usleep(1100000);
            echo (new Resilient\\Funnel("stuck", limit: 2))->tryAcquire() !== null ? "used" : "not used";';
        $go = Run::tempDir('stuck-req') . '/go';
        $p = PhpProcess::code(sprintf($code, var_export($go, true)), ['resilient.shm_path' => $path, 'resilient.shm_required' => '1']);
        try {
            $this->assertTrue($p->waitForOutput(fn ($o) => str_contains($o, "]\n"), 30.0), 'the uses did not end');
            $uses = json_decode(strtok($p->stdoutSoFar(), "\n"), true);
            $this->assertGreaterThanOrEqual(1900, $uses[0]['ms'], 'the first use waits for the creator');
            foreach ($uses as $i => $use) {
                $this->assertStringContainsString('being initialised or opened by another process', (string) $use['error'], "use $i");
                if ($i > 0) {
                    $this->assertLessThan(1000, $use['ms'], "use $i waited again: " . json_encode($uses));
                }
            }
        } finally {
            $creator->signal(SIGKILL);
            $creator->wait(5);
        }
        touch($go);
        $r = $p->wait(30);
        $this->assertStringEndsWith('used', $r->stdout, $r->describe());
        $this->assertStringNotContainsString('not used', $r->stdout);
    }
}
