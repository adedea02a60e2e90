<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Issue 4, must show 1: the lab cleans up every process it started, also on Ctrl-C.
 *
 * Starts `lab/run.sh` in its own process group (as a terminal would), waits until the system
 * under test is up (php-fpm, nginx, the upstream simulator are its descendants), records every
 * descendant, sends SIGINT to the group (what Ctrl-C does) and then checks that each recorded
 * process is gone and no shared-memory file of the run is left.
 */
final class LabCleanupTest extends TestCase
{
    public function testCtrlCStopsEveryProcessTheLabStarted(): void
    {
        $log = Run::tempDir('lab-cleanup') . '/lab.log';
        $proc = proc_open(
            ['setsid', 'bash', 'lab/run.sh', '--quick', '--variants', 'naive', '--phase-secs', '30'],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['file', $log, 'a']],
            $pipes,
            Run::root(),
        );
        $this->assertIsResource($proc);
        $pid = proc_get_status($proc)['pid'];
        Run::trackPid($pid);

        // Wait (bounded) until php-fpm and nginx run below the lab.
        [$tree] = $this->waitFor(function () use ($pid) {
            $tree = self::descendants($pid);
            $names = array_map(fn ($p) => self::comm($p), $tree);
            $up = array_filter($names, fn ($n) => str_starts_with($n, 'php-fpm')) && in_array('nginx', $names, true)
                && in_array('resilient-upstr', $names, true);
            return $up ? $tree : null;
        }, 180, 'the lab to start php-fpm, nginx and the upstream (log: ' . $log . ')', 0.2);
        $this->assertGreaterThanOrEqual(4, count($tree));

        posix_kill(-$pid, SIGINT); // the whole foreground group, as Ctrl-C
        $this->waitFor(fn () => !proc_get_status($proc)['running'], 60, 'the lab to exit after SIGINT', 0.1);
        proc_close($proc);
        Run::untrackPid($pid);

        $this->waitFor(fn () => array_filter($tree, fn ($p) => self::alive($p)) === [], 10, 'every process of the lab to be gone');
        $left = array_filter($tree, fn ($p) => self::alive($p));
        $this->assertSame([], $left, 'still running after Ctrl-C: ' . implode(', ', array_map(fn ($p) => "$p " . self::comm($p), $left)));
        foreach ($tree as $p) {
            $this->assertSame([], glob("/dev/shm/resilient-lab-$p-*") ?: [], "shm file of lab process $p left behind");
        }
    }

    /** @return list<int> every live descendant of $root */
    private static function descendants(int $root): array
    {
        $children = [];
        foreach (glob('/proc/[0-9]*/stat') ?: [] as $stat) {
            $s = @file_get_contents($stat);
            if ($s === false) {
                continue;
            }
            // pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'.
            $pid = (int) $s;
            $rest = explode(' ', substr($s, strrpos($s, ')') + 2));
            $children[(int) $rest[1]][] = $pid;
        }
        $out = [];
        $todo = [$root];
        while ($todo) {
            foreach ($children[array_pop($todo)] ?? [] as $c) {
                $out[] = $c;
                $todo[] = $c;
            }
        }
        return $out;
    }

    private static function comm(int $pid): string
    {
        return trim((string) @file_get_contents("/proc/$pid/comm"));
    }

    private static function alive(int $pid): bool
    {
        $s = @file_get_contents("/proc/$pid/stat");
        // A zombie has exited; only its parent's wait is missing.
        return $s !== false && substr($s, strrpos($s, ')') + 2, 1) !== 'Z';
    }
}
