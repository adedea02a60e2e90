<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

require_once __DIR__ . '/support/LabProcess.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The lab runs from a long checkout path (CI's /home/runner/work/resilient/resilient and the like).
 *
 * The run's folders (<out>/run-…/<scenario>/<variant>/) then go past the 107 bytes a unix
 * socket's path may have, and php-fpm's status socket and nginx's fastcgi_pass to it lived there.
 * One short run of one variant with such an --out: it must run, and leave no socket folder behind.
 */
final class LabLongPathTest extends TestCase
{
    public function testALongOutputPathRunsAndLeavesNoSocketFolder(): void
    {
        $dir = Run::tempDir('lab-long-path');
        $out = $dir . '/' . str_repeat('a-long-checkout-path/', 4) . 'lab/out';
        $this->assertGreaterThan(107, strlen($out . '/run-20260101-000000-12345/slowdown/naive/fpm-status.sock'));
        $lab = LabProcess::start(
            ['--out', $out, '--quick', '--variants', 'naive', '--phase-secs', '2', '--drain-secs', '2'],
            "$dir/lab.log",
        );
        $this->waitFor(fn () => !$lab->running(), 180, 'the lab to finish (log: ' . $lab->log . ')', 0.2);
        $log = $lab->output();
        $this->assertStringNotContainsString('did not run', $log, $log);
        $this->assertSame(0, $lab->exitCode(), $log);
        $this->assertFileExists("$out/report.md");
        $this->assertSame([], glob('/tmp/resilient-lab-' . $lab->pid . '*') ?: [], 'the socket folder is left behind');
    }
}
