<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

require_once __DIR__ . '/support/LabProcess.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A variant that fails in the middle of its run (here its upstream simulator is killed, so the
 * next phase switch fails) stops everything it started: its load generators, its sampler and
 * its progress line, not only its processes. Before, they went on through the next variant's
 * run: its progress lines among the next variant's, its load sent to a stopped nginx whose
 * port the next variant might get.
 */
final class LabVariantFailureTest extends TestCase
{
    public function testAVariantThatFailsMidRunStopsItsTasks(): void
    {
        $dir = Run::tempDir('lab-variant-fails');
        $lab = LabProcess::start(
            ['--out', "$dir/out", '--quick', '--variants', 'naive,resilient', '--phase-secs', '8'],
            "$dir/lab.log",
        );
        try {
            // The measured run under way: naive's first progress line (every 5 s off a terminal).
            $this->waitFor(fn () => str_contains($lab->output(), '[    naive]') ?: null, 180,
                "naive's measured run (log: {$lab->log})", 0.2);
            $upstreams = array_values(array_filter(LabProcess::descendants($lab->pid),
                fn ($p) => LabProcess::comm($p) === 'resilient-upstr'));
            $this->assertCount(1, $upstreams, $lab->output());
            posix_kill($upstreams[0], SIGKILL);

            $this->waitFor(fn () => str_contains($lab->output(), '[naive] FAILED') ?: null, 30,
                "naive to fail at its next phase switch (log: {$lab->log})", 0.1);
            // The next variant runs meanwhile; naive's progress task, had it survived, would
            // print within its 5 s period.
            $this->waitFor(fn () => substr_count($lab->output(), '[resilient]') >= 2 ?: null, 120,
                "two of resilient's progress lines (log: {$lab->log})", 0.2);
            $out = $lab->output();
            $after = substr($out, strpos($out, '[naive] FAILED'));
            $this->assertStringNotContainsString('[    naive]', $after, "naive's progress after its failure:\n$after");
        } finally {
            if ($lab->running()) {
                posix_kill(-$lab->pid, SIGINT);
                $this->waitFor(fn () => !$lab->running(), 60, 'the lab to exit after SIGINT', 0.1);
            }
        }
    }
}
