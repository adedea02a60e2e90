<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A container restarted in a new pid namespace keeps its `/dev/shm` when the pod's is kept (a
 * Kubernetes container restarted after an OOM kill or a failed liveness probe): its processes find
 * the segment file their predecessors made in another pid namespace, or, when the kernel gave the
 * old namespace's number again, in what looks like theirs. Holders are told apart by pid, so a
 * file still mapped by processes of another namespace must be refused; one nobody maps any more
 * is taken over, what its dead processes held forgotten (their pids now name live processes of
 * the new container). Before, such a file was refused for good: after the first restart each
 * process of the container counted alone (degraded) until someone removed the file; and with the
 * number given again, a killed holder's slot stayed held by whichever new process got its pid.
 *
 * Each process here runs under `unshare --pid --fork --mount-proc`, in a pid namespace of its own,
 * as pid 2 (a shell is its pid 1, as a container's init is): every run's PHP has the same pid.
 */
final class PidNamespaceTest extends TestCase
{
    /** What a process of the container does: takes a slot of a funnel and says how it went. */
    private const USE_IT = '$f = new Resilient\Funnel("ns", limit: 2); $l = $f->tryAcquire(background: false);
        echo json_encode(["degraded" => $f->isDegraded(), "reason" => Resilient\Funnel::degradedReason(), "in_flight" => $f->inFlight()]), "\n";';

    /** A process killed while it holds a slot (no request end frees it). */
    private const KILLED_HOLDING = '$f = new Resilient\Funnel("ns", limit: 2); $l = $f->tryAcquire(background: false);
        posix_kill(getmypid(), SIGKILL);';

    private string $path;

    protected function setUp(): void
    {
        parent::setUp();
        exec('unshare --pid --fork --mount-proc true 2>&1', $out, $rc);
        if ($rc !== 0) {
            $this->markTestSkipped('cannot make a pid namespace here (unshare needs root): ' . implode(' ', $out));
        }
        $this->path = Run::shmPath('pidns-' . bin2hex(random_bytes(3)));
    }

    protected function tearDown(): void
    {
        @unlink($this->path);
        parent::tearDown();
    }

    /**
     * Starts `$code` in a new pid namespace on the test's segment; its stdin is a pipe, so a
     * holder can wait on it (`fgets(STDIN)`) and ends when it is closed.
     *
     * @return array{resource, array<int,resource>}
     */
    private function start(string $code): array
    {
        $cmd = ['unshare', '--pid', '--fork', '--mount-proc', 'bash', '-c', '"$@"; exit', 'init',
            Run::root() . '/tests/harness/php.sh', '-d', 'resilient.shm_path=' . $this->path, '-r', $code];
        $proc = proc_open($cmd, [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, Run::root());
        $this->assertIsResource($proc);
        return [$proc, $pipes];
    }

    /** @return array{degraded: bool, reason: ?string, in_flight: int} */
    private function runOnce(string $code = self::USE_IT, int $exit = 0): array
    {
        [$proc, $pipes] = $this->start($code);
        fclose($pipes[0]);
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        $this->assertSame($exit, proc_close($proc), "$out\n$err");
        return $exit === 0 ? json_decode($out, true, flags: JSON_THROW_ON_ERROR) : [];
    }

    public function testAFileNobodyMapsAnyMoreIsTakenOverWhatItsDeadHoldersHeldForgotten(): void
    {
        $this->runOnce(self::KILLED_HOLDING, 128 + SIGKILL);
        $this->assertFileExists($this->path);

        $second = $this->runOnce();
        $this->assertFalse($second['degraded'], 'a restarted container shares the file again: ' . $second['reason']);
        $this->assertSame(1, $second['in_flight'], 'its own slot only: the killed holder\'s, by a pid now its own, forgotten');
        $third = $this->runOnce();
        $this->assertSame(1, $third['in_flight'], 'each run ended: its slot given back');
    }

    public function testAFileStillMappedInAnotherNamespaceIsRefused(): void
    {
        [$holder, $pipes] = $this->start(self::USE_IT . ' fgets(STDIN);');
        $said = fgets($pipes[1]);
        if ($said === false) {
            $this->fail('the holder did not start: ' . stream_get_contents($pipes[2]));
        }
        $this->assertFalse(json_decode($said, true)['degraded'], $said);

        $other = $this->runOnce();
        $this->assertTrue($other['degraded'], 'two pid namespaces must not share one file');
        $this->assertStringContainsString('another pid namespace', (string) $other['reason']);
        $this->assertStringContainsString('still in use there', (string) $other['reason']);

        fclose($pipes[0]); // the holder ends
        stream_get_contents($pipes[1]);
        $this->assertSame(0, proc_close($holder));
        $after = $this->runOnce();
        $this->assertFalse($after['degraded'], 'its holder gone, the file is taken over: ' . $after['reason']);
    }
}
