<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A segment file changed under a running process. A long-lived process (an FPM worker,
 * a queue worker) keeps its mapping between requests; before each new use (at most once a
 * second) it checks that the file was not shrunk, removed or replaced, and reopens the path if
 * it was. So the next request after `truncate` gets a clean degraded mode (or error) instead of
 * SIGBUS, and after `rm` it creates and shares a fresh file. What cannot be avoided (an access
 * through a mapping in the very call during which the file shrinks) is in docs/shared-memory.md.
 */
final class ShrunkFileTest extends TestCase
{
    /** A worker that uses the segment, waits for `go`, then uses it again (a "next request"). */
    private function worker(string $path, string $go, array $ini = []): PhpProcess
    {
        $code = sprintf('
            $a = new Resilient\Funnel("shrink", limit: 2); $a->tryAcquire(background: false);
            echo "ready\n";
            while (!file_exists(%s)) { usleep(5000); }
            usleep(1100000); // past the revalidation interval
            $b = new Resilient\Funnel("shrink", limit: 2); $l = $b->tryAcquire(background: false);
            echo json_encode(["degraded" => $b->isDegraded(), "reason" => Resilient\Funnel::degradedReason(), "held" => $l !== null, "in_flight" => $b->inFlight()]), "\n";
            sleep(5);', var_export($go, true));
        $w = PhpProcess::code($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8'] + $ini);
        $this->assertTrue($w->waitForOutput(fn ($o) => str_contains($o, 'ready'), 10.0), 'worker did not start');
        return $w;
    }

    private function answer(PhpProcess $w): array
    {
        $this->assertTrue($w->waitForOutput(fn ($o) => substr_count($o, "\n") >= 2, 10.0), 'no answer');
        return json_decode(explode("\n", $w->stdoutSoFar())[1], true);
    }

    public function testATruncatedFileMeansDegradedModeForTheNextUseNotSigbus(): void
    {
        $path = Run::shmPath('shrink-' . bin2hex(random_bytes(3)));
        $go = Run::tempDir('shrink') . '/go';
        $w = $this->worker($path, $go);
        $fh = fopen($path, 'r+');
        ftruncate($fh, 100);
        fclose($fh);
        touch($go);
        $v = $this->answer($w);
        $w->signal(SIGTERM);
        $r = $w->wait(10);
        $this->assertNotSame(SIGBUS, $r->signal, $r->describe());
        $this->assertTrue($v['degraded'], json_encode($v));
        $this->assertStringContainsString('corrupt', $v['reason']);
        $this->assertTrue($v['held']);
    }

    public function testARemovedFileIsCreatedAgainAndShared(): void
    {
        $path = Run::shmPath('removed-' . bin2hex(random_bytes(3)));
        $go = Run::tempDir('removed') . '/go';
        $log = dirname($go) . '/php-error.log';
        $w = $this->worker($path, $go, ['log_errors' => '1', 'error_log' => $log]);
        unlink($path);
        touch($go);
        $v = $this->answer($w);
        try {
            $this->assertFalse($v['degraded'], json_encode($v));
            $this->assertSame(1, $v['in_flight'], 'only the new lease: a fresh file');
            // Said once: the counts start afresh, which a cleaner's removal would otherwise hide.
            $said = (string) @file_get_contents($log);
            $this->assertSame(1, substr_count($said, "shared memory segment $path was removed, replaced or shrunk while in use"), $said);
            clearstatcache();
            $this->assertFileExists($path);
            // Another process sees the worker's lease in the new file.
            $probe = PhpProcess::runScript('probe.php', ['in_flight', 'shrink', 2], ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8'], 10);
            $this->assertSame(['in_flight' => 1], $probe->json());
        } finally {
            $w->signal(SIGTERM);
            $w->wait(10);
        }
    }

    /**
     * A client kept by a long-running worker (Laravel's manager keeps one per name for the
     * process) follows the file too. After `rm` it counts in the new file, where the only slot
     * is held by another object, so it refuses instead of sending. After `truncate` it does not
     * fault.
     */
    public function testAClientKeptAcrossTheChangeUsesTheNewFile(): void
    {
        foreach (['removed', 'truncated'] as $change) {
            $path = Run::shmPath("client-$change-" . bin2hex(random_bytes(3)));
            $code = sprintf('
                $c = new Resilient\Client("kept", ["base_url" => "http://127.0.0.1:9", "max_attempts" => 1, "budget" => false, "funnel" => ["limit" => 1]]);
                $call = function () use ($c) { try { $c->get("/"); return "sent"; } catch (Resilient\Unavailable $e) { return (new ReflectionClass($e))->getShortName(); } };
                echo $call(), " ";
                if (%1$s === "removed") { unlink(%2$s); } else { $fh = fopen(%2$s, "r+"); ftruncate($fh, 100); fclose($fh); }
                usleep(1100000); // past the revalidation interval
                $lease = (new Resilient\Funnel("kept", 1))->tryAcquire();
                echo $lease !== null ? "held" : "not held", " ", $call();', var_export($change, true), var_export($path, true));
            $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8']);
            $this->assertNotSame(SIGBUS, $r->signal, "$change: " . $r->describe());
            $this->assertSame('UpstreamFailed held FunnelFull', trim($r->stdout), "$change: " . $r->describe());
        }
    }

    /**
     * A Funnel and a RetryBudget object kept by a long-running worker follow the file as a
     * client does: after `rm` they count in the new file, after `truncate` in this process's
     * degraded segment instead of faulting (SIGBUS). Either way they count where a new object
     * does: the funnel's only slot, held by another object, leaves it full, and the budget's
     * one retry, spent by another, leaves none.
     */
    public function testFunnelAndBudgetObjectsKeptAcrossTheChangeUseTheNewFile(): void
    {
        $expected = ['removed' => 'full spent shared', 'truncated' => 'full spent degraded'];
        foreach ($expected as $change => $want) {
            $path = Run::shmPath("objects-$change-" . bin2hex(random_bytes(3)));
            $code = sprintf('
                $f = new Resilient\Funnel("kept-objects", 1);
                $b = new Resilient\RetryBudget("kept-objects", 0.0, 1, 60.0);
                $f->tryAcquire(); // held, then given back at once (not kept)
                if (%1$s === "removed") { unlink(%2$s); } else { $fh = fopen(%2$s, "r+"); ftruncate($fh, 100); fclose($fh); }
                usleep(1100000); // past the revalidation interval
                $other = (new Resilient\Funnel("kept-objects", 1))->tryAcquire();
                (new Resilient\RetryBudget("kept-objects", 0.0, 1, 60.0))->tryConsume();
                echo $f->tryAcquire() === null ? "full" : "free", " ", $b->tryConsume() ? "granted" : "spent", " ", $f->isDegraded() ? "degraded" : "shared";', var_export($change, true), var_export($path, true));
            $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8']);
            $this->assertNotSame(SIGBUS, $r->signal, "$change: " . $r->describe());
            $this->assertSame($want, trim($r->stdout), "$change: " . $r->describe());
        }
    }

    /**
     * A kept Funnel whose rebuild on the new file fails (the new file's table is full) keeps
     * failing, by name, until it can be built: it must not go back to the removed file's
     * mapping at its next use.
     */
    public function testAFunnelThatCannotBeBuiltOnTheNewFileDoesNotFallBackToTheOldOne(): void
    {
        $path = Run::shmPath('rebuild-' . bin2hex(random_bytes(3)));
        $go = Run::tempDir('rebuild') . '/go';
        $ini = ['resilient.shm_path' => $path, 'resilient.shm_slots' => '2'];
        $code = sprintf('
            $f = new Resilient\Funnel("rebuild-kept", 1);
            echo "ready\n";
            while (!file_exists(%s)) { usleep(5000); }
            usleep(1100000); // past the revalidation interval
            Resilient\Funnel::degradedReason(); // another use moves the process to the new file first
            $out = [];
            for ($i = 0; $i < 2; $i++) {
                try { $out[] = $f->tryAcquire() === null ? "full" : "held"; }
                catch (Resilient\SharedMemoryError $e) { $out[] = str_contains($e->getMessage(), "table is full") ? "table full" : $e->getMessage(); }
            }
            echo implode(", ", $out), "\n";', var_export($go, true));
        $w = PhpProcess::code($code, $ini);
        try {
            $this->assertTrue($w->waitForOutput(fn ($o) => str_contains($o, 'ready'), 10.0), 'worker did not start');
            unlink($path);
            $fill = PhpProcess::runCode('new Resilient\Funnel("other-1", 1); new Resilient\Funnel("other-2", 1); echo "filled";', $ini);
            $this->assertSame('filled', $fill->stdout, $fill->describe());
            touch($go);
            $this->assertTrue($w->waitForOutput(fn ($o) => substr_count($o, "\n") >= 2, 10.0), 'no answer');
            $this->assertSame('table full, table full', explode("\n", $w->stdoutSoFar())[1]);
        } finally {
            $w->signal(SIGTERM);
            $w->wait(10);
        }
    }

    /**
     * A process degraded by an unusable file (here one that is not a segment) leaves the
     * degraded mode by itself once the file is removed: a queue worker is not restarted when
     * an operator fixes the file. Its next use after the revalidation interval creates the file
     * and counts host-wide, which another process sees.
     */
    public function testADegradedWorkerRecoversWhenTheFileBecomesUsable(): void
    {
        $path = Run::shmPath('recover-' . bin2hex(random_bytes(3)));
        file_put_contents($path, str_repeat('junk', 1024));
        chmod($path, 0600);
        $go = Run::tempDir('recover') . '/go';
        $code = sprintf('
            $a = new Resilient\Funnel("recover", limit: 2);
            echo $a->isDegraded() ? "degraded\n" : "shared\n";
            while (!file_exists(%s)) { usleep(5000); }
            usleep(1100000); // past the revalidation interval
            $b = new Resilient\Funnel("recover", limit: 2); $l = $b->tryAcquire();
            echo json_encode(["degraded" => $b->isDegraded(), "held" => $l !== null]), "\n";
            sleep(5);', var_export($go, true));
        $w = PhpProcess::code($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8']);
        try {
            $this->assertTrue($w->waitForOutput(fn ($o) => str_contains($o, "\n"), 10.0), 'worker did not start');
            $this->assertSame("degraded\n", $w->stdoutSoFar(), 'a file that is not a segment is refused');
            unlink($path);
            touch($go);
            $this->assertTrue($w->waitForOutput(fn ($o) => substr_count($o, "\n") >= 2, 10.0), 'no answer');
            $v = json_decode(explode("\n", $w->stdoutSoFar())[1], true);
            $this->assertSame(['degraded' => false, 'held' => true], $v);
            $probe = PhpProcess::runScript('probe.php', ['in_flight', 'recover', 2], ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8'], 10);
            $this->assertSame(['in_flight' => 1], $probe->json(), 'the lease is in the shared file');
        } finally {
            $w->signal(SIGTERM);
            $r = $w->wait(10);
        }
        $this->assertStringContainsString('usable again', $r->stderr, $r->describe());
    }

    /**
     * With shm_required=1, a file replaced by garbage under a running process: once a use has
     * thrown, every later use throws too, whichever object makes it. The process used to fall
     * back to its old mapping (a file nobody else maps) for the next second and report itself
     * shared; a kept Client never threw, and a Funnel that had asked less than a second before
     * went on counting in the old file.
     */
    public function testARequiredSegmentThatBecameUnusableKeepsThrowing(): void
    {
        $path = Run::shmPath('required-' . bin2hex(random_bytes(3)));
        $code = sprintf('
            $path = %s;
            $f = new Resilient\Funnel("required", limit: 2);
            $c = new Resilient\Client("required-client", ["base_url" => "http://127.0.0.1:9", "funnel" => ["limit" => 2], "max_attempts" => 1]);
            $before = $f->tryAcquire(background: false) !== null;
            usleep(500_000);
            $g = new Resilient\Funnel("required-later", limit: 2); // asks half a second after $f
            $before = $before && $g->tryAcquire(background: false) !== null;
            unlink($path);
            file_put_contents($path, random_bytes(4096));
            chmod($path, 0600);
            $uses = [];
            $end = hrtime(true) + 2_500_000_000;
            while (hrtime(true) < $end) {
                foreach (["funnel" => fn () => $f->tryAcquire(background: false), "client" => fn () => $c->get("/"), "later funnel" => fn () => $g->tryAcquire(background: false)] as $what => $use) {
                    try { $use(); $uses[] = [$what, "ok"]; }
                    catch (Resilient\SharedMemoryError $e) { $uses[] = [$what, "threw"]; }
                    catch (Throwable $e) { $uses[] = [$what, get_class($e)]; }
                }
                usleep(50_000);
            }
            echo json_encode(["before" => $before, "uses" => $uses]);', var_export($path, true));
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8', 'resilient.shm_required' => '1'], 30);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertTrue($out['before']);
        $results = array_column($out['uses'], 1);
        $first = array_search('threw', $results, true);
        $this->assertNotFalse($first, 'never threw: ' . json_encode($out['uses']));
        foreach (array_slice($out['uses'], $first) as [$what, $result]) {
            $this->assertSame('threw', $result, "$what after the first refusal: " . json_encode($out['uses']));
        }
        foreach (['funnel', 'client', 'later funnel'] as $what) {
            $this->assertContains([$what, 'threw'], $out['uses']);
        }
    }

    /** A degraded process says why it is degraded today, not why it was at first. */
    public function testTheDegradedReasonFollowsTheFile(): void
    {
        $path = Run::shmPath('reason-' . bin2hex(random_bytes(3)));
        file_put_contents($path, random_bytes(4096));
        chmod($path, 0600);
        $code = sprintf('
            $path = %s;
            $out = ["first" => Resilient\Funnel::degradedReason()];
            unlink($path);
            mkdir($path);
            usleep(1_100_000); // past the revalidation interval
            $out["later"] = Resilient\Funnel::degradedReason();
            rmdir($path);
            echo json_encode($out);', var_export($path, true));
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => $path, 'resilient.shm_slots' => '8'], 30);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertStringContainsString('bad magic', (string) $out['first'], json_encode($out));
        $this->assertStringContainsString('directory', (string) $out['later'], json_encode($out));
    }
}
