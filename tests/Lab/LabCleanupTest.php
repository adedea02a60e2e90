<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

require_once __DIR__ . '/support/LabProcess.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The lab cleans up every process it started, also on Ctrl-C.
 *
 * Starts `lab/run.sh` in its own process group (as a terminal would), waits until the system
 * under test is up (php-fpm, nginx, the upstream simulator are its descendants), records every
 * descendant, sends SIGINT to the group (what Ctrl-C does) and then checks that each recorded
 * process is gone and no shared-memory file or socket folder of the run is left.
 */
final class LabCleanupTest extends TestCase
{
    public function testCtrlCStopsEveryProcessTheLabStarted(): void
    {
        $dir = Run::tempDir('lab-cleanup');
        $log = "$dir/lab.log";
        // Its own output directory: lab/out keeps the user's runs (and its lock).
        $proc = proc_open(
            ['setsid', 'bash', 'lab/run.sh', '--quick', '--variants', 'naive', '--phase-secs', '30', '--out', "$dir/out"],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'a']],
            $pipes,
            Run::root(),
        );
        $this->assertIsResource($proc);
        $pid = proc_get_status($proc)['pid'];
        Run::trackPid($pid);

        // Wait (bounded) until php-fpm and nginx run below the lab.
        [$tree] = $this->waitFor(function () use ($pid) {
            $tree = LabProcess::descendants($pid);
            $names = array_map(fn ($p) => LabProcess::comm($p), $tree);
            $up = array_filter($names, fn ($n) => str_starts_with($n, 'php-fpm')) && in_array('nginx', $names, true)
                && in_array('resilient-upstr', $names, true);
            return $up ? $tree : null;
        }, 180, 'the lab to start php-fpm, nginx and the upstream (log: ' . $log . ')', 0.2);
        $this->assertGreaterThanOrEqual(4, count($tree));

        posix_kill(-$pid, SIGINT); // the whole foreground group, as Ctrl-C
        $this->waitFor(fn () => !proc_get_status($proc)['running'], 60, 'the lab to exit after SIGINT', 0.1);
        proc_close($proc);
        Run::untrackPid($pid);

        $this->waitFor(fn () => array_filter($tree, fn ($p) => LabProcess::alive($p)) === [], 10, 'every process of the lab to be gone');
        $left = array_filter($tree, fn ($p) => LabProcess::alive($p));
        $this->assertSame([], $left, 'still running after Ctrl-C: ' . implode(', ', array_map(fn ($p) => "$p " . LabProcess::comm($p), $left)));
        foreach ($tree as $p) {
            $this->assertSame([], glob("/dev/shm/resilient-lab-$p-*") ?: [], "shm file of lab process $p left behind");
            $this->assertDirectoryDoesNotExist("/tmp/resilient-lab-$p", "socket folder of lab process $p left behind");
        }
    }
}
