<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A segment on a full tmpfs. The file used to be sized sparsely and mapped, so
 * the creator died of SIGBUS on first touch and left a header-less file behind. Now its pages
 * are reserved at creation: a clean SharedMemoryError with shm_required=1, the degraded mode
 * (with its one log line) without, no signal either way, and no half-made file left.
 *
 * Needs root (mounts a 64 KB tmpfs, unmounted after).
 */
final class FullFileSystemTest extends TestCase
{
    private static ?string $mount = null;

    public static function setUpBeforeClass(): void
    {
        if (posix_geteuid() !== 0) {
            return;
        }
        $dir = Run::tempDir('tmpfs64k');
        exec('mount -t tmpfs -o size=64k,mode=0700 tmpfs ' . escapeshellarg($dir) . ' 2>&1', $out, $rc);
        if ($rc === 0) {
            self::$mount = $dir;
        }
    }

    public static function tearDownAfterClass(): void
    {
        if (self::$mount !== null) {
            exec('umount ' . escapeshellarg(self::$mount));
            self::$mount = null;
        }
    }

    protected function setUp(): void
    {
        if (self::$mount === null) {
            $this->markTestSkipped('needs root to mount a 64 KB tmpfs');
        }
    }

    private const USE_IT = '$f = new Resilient\Funnel("full", limit: 2); $l = $f->tryAcquire(background: false);
        return ["degraded" => $f->isDegraded(), "reason" => Resilient\Funnel::degradedReason(), "held" => $l !== null, "in_flight" => $f->inFlight()];';

    public function testRequiredSegmentOnAFullTmpfsIsACleanError(): void
    {
        // 256 slots need 196,672 bytes: more than the 64 KB file system holds.
        $path = self::$mount . '/required.shm';
        $r = PhpProcess::runScript('expect_throw.php', [self::USE_IT], ['resilient.shm_path' => $path, 'resilient.shm_required' => '1'], 20);
        $this->assertNull($r->signal, 'no SIGBUS: ' . $r->describe());
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertTrue($out['threw'], json_encode($out));
        $this->assertSame('Resilient\SharedMemoryError', $out['class']);
        $this->assertStringContainsString($path, $out['message']);
        $this->assertStringContainsString('cannot reserve ' . Run::segmentSize(256) . ' bytes', $out['message']);
        clearstatcache();
        $this->assertFileDoesNotExist($path, 'the half-made file must be removed');
        fwrite(STDERR, "\n[tmpfs 64k] {$out['message']}\n");
    }

    public function testSegmentOnAFullTmpfsDegradesAndSaysSoOnce(): void
    {
        $path = self::$mount . '/degraded.shm';
        $log = Run::tempDir('log') . '/php-error.log';
        $r = PhpProcess::runScript('expect_throw.php', ['$use = function () { ' . self::USE_IT . ' }; $use(); new Resilient\RetryBudget("b"); return $use();'], ['resilient.shm_path' => $path, 'error_log' => $log], 20);
        $this->assertNull($r->signal, 'no SIGBUS: ' . $r->describe());
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertFalse($out['threw'], json_encode($out));
        $this->assertTrue($out['returned']['degraded']);
        $this->assertTrue($out['returned']['held']);
        $this->assertSame(1, $out['returned']['in_flight']);
        $this->assertStringContainsString('cannot reserve', $out['returned']['reason']);
        $lines = array_filter(explode("\n", (string) @file_get_contents($log)), fn ($l) => str_contains($l, 'falling back to process-local guards'));
        $this->assertCount(1, $lines, (string) @file_get_contents($log));
        clearstatcache();
        $this->assertFileDoesNotExist($path);
    }

    /**
     * docs/shared-memory.md: in the degraded mode the metrics throw (a metrics route answers
     * 500, Prometheus marks the target down), never an empty "nothing recorded". With no file
     * made (the file system is full), they answered [] and reset() false.
     */
    public function testTheMetricsOfAProcessDegradedOnAFullTmpfsThrow(): void
    {
        $path = self::$mount . '/metrics.shm';
        $code = 'Resilient\\Metrics::recordSynthetic("full", 3); $out = [Resilient\\Funnel::degradedReason() !== null];
            foreach (["snapshot" => fn () => Resilient\\Metrics::snapshot(), "prometheus" => fn () => Resilient\\Metrics::prometheus(),
                      "reset" => fn () => Resilient\\Metrics::reset("full")] as $what => $read) {
                try { $read(); $out[$what] = "answered"; } catch (Resilient\\SharedMemoryError $e) { $out[$what] = $e->getMessage(); }
            }
            echo json_encode($out);';
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'log_errors' => '0'], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = json_decode($r->stdout, true);
        $this->assertTrue($out[0], 'degraded');
        foreach (['snapshot', 'prometheus', 'reset'] as $what) {
            $this->assertStringContainsString("Resilient\\Metrics::$what(): the host's counters are in the shared memory segment, which this process cannot use", $out[$what], $what);
            $this->assertStringContainsString('cannot reserve', $out[$what], $what);
        }
    }

    public function testASmallTableFitsAndIsShared(): void
    {
        // 16 slots = 12,352 bytes: fits, and a second process sees the first one's lease.
        $path = self::$mount . '/small.shm';
        $ini = ['resilient.shm_path' => $path, 'resilient.shm_slots' => '16', 'resilient.shm_required' => '1'];
        $holder = PhpProcess::code('$f = new Resilient\Funnel("full", limit: 2); $l = $f->tryAcquire(background: false); echo "held\n"; sleep(10);', $ini);
        $this->assertTrue($holder->waitForOutput(fn ($o) => str_contains($o, 'held'), 10.0));
        try {
            $r = PhpProcess::runScript('expect_throw.php', [self::USE_IT], $ini, 20);
            $out = $r->json();
            $this->assertFalse($out['threw'], json_encode($out));
            $this->assertFalse($out['returned']['degraded']);
            $this->assertSame(2, $out['returned']['in_flight'], 'the holder\'s lease and ours, in one shared segment: ' . json_encode($out));
        } finally {
            $holder->signal(SIGKILL);
            $holder->wait(5);
        }
        $this->assertSame(Run::segmentSize(16), filesize($path));
    }
}
