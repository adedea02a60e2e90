<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

require_once __DIR__ . '/support/LabProcess.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Every process the lab started dies with it, also when the lab is killed with SIGKILL (no
 * clean-up of its own can run then). php-fpm makes itself a session leader, so no process-group
 * kill reaches it or its workers.
 *
 * Starts the lab in a session of its own, waits until php-fpm (master and workers), nginx and
 * the upstream run below it, records them (and php-fpm's pid file), sends SIGKILL to the lab
 * alone, and watches from here, by pid, until each recorded process is gone.
 */
final class LabKillTest extends TestCase
{
    public function testKill9OfTheLabLeavesNoProcessBehind(): void
    {
        $dir = Run::tempDir('lab-kill9');
        $lab = LabProcess::start(
            ['--out', "$dir/out", '--quick', '--variants', 'naive', '--phase-secs', '30'],
            "$dir/lab.log",
        );
        $tree = [];
        try {
            [$tree] = $this->waitFor(function () use ($lab) {
                $tree = LabProcess::descendants($lab->pid);
                $names = array_map(fn ($p) => LabProcess::comm($p), $tree);
                $fpm = array_filter($names, fn ($n) => str_starts_with($n, 'php-fpm'));
                $up = count($fpm) >= 2 && in_array('nginx', $names, true) && in_array('resilient-upstr', $names, true);
                return $up ? $tree : null;
            }, 180, 'the lab to start php-fpm, nginx and the upstream (log: ' . $lab->log . ')', 0.2);
            $pidFiles = glob("$dir/out/run-*/slowdown/naive/fpm.pid") ?: [];
            $this->assertCount(1, $pidFiles, 'php-fpm pid file');
            $master = (int) file_get_contents($pidFiles[0]);
            $this->assertContains($master, $tree, 'the php-fpm master of the pid file runs below the lab');

            // Every worker up and the load running: the tree as it is now.
            sleep(2);
            $tree = LabProcess::descendants($lab->pid);
            posix_kill($lab->pid, SIGKILL);
            $this->waitFor(fn () => !$lab->running(), 10, 'the lab to die', 0.05);

            $until = microtime(true) + 15;
            while (array_filter($tree, fn ($p) => LabProcess::alive($p)) !== [] && microtime(true) < $until) {
                usleep(100_000);
            }
        } finally {
            $left = array_values(array_filter($tree, fn ($p) => LabProcess::alive($p)));
            $names = implode(', ', array_map(fn ($p) => "$p " . LabProcess::comm($p), $left));
            // Whatever this test started and is still there, by pid: parents before their
            // children, so no php-fpm master respawns a worker meanwhile.
            foreach ($left as $p) {
                posix_kill($p, SIGKILL);
            }
            if ($lab->running()) {
                posix_kill($lab->pid, SIGKILL);
            }
            // The killed lab's socket folder (lab/run.sh removes it; the lab could not).
            array_map('unlink', glob("/tmp/resilient-lab-{$lab->pid}/*") ?: []);
            @rmdir("/tmp/resilient-lab-{$lab->pid}");
        }
        $this->assertSame([], $left, "still running 15 s after kill -9 of the lab: $names");
    }
}
