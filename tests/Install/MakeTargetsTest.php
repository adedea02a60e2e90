<?php

declare(strict_types=1);

namespace Resilient\Tests\Install;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * What `make test` and `make bench` report: a failure is never told as a pass.
 */
final class MakeTargetsTest extends TestCase
{
    /**
     * phpunit.xml.dist fails the run on a risky test or a warning: the closing line counts
     * them as failed. Before, "Tests: 2, Assertions: 1, Risky: 1." added up to 2 passed.
     */
    public function testTheClosingLineCountsWhatFailsPhpunitsRunAsFailed(): void
    {
        $dir = Run::tempDir('summary');
        file_put_contents("$dir/cargo.log", "test result: ok. 5 passed; 0 failed; 0 ignored\n");
        file_put_contents("$dir/lab.log", "== CI check\n[ met ] x\n");
        $summary = function (string $phpunit) use ($dir): string {
            file_put_contents("$dir/phpunit.log", $phpunit);
            exec(sprintf('%s/tests/harness/summary.sh %s %s %s 2>&1', escapeshellarg(Run::root()),
                escapeshellarg("$dir/cargo.log"), escapeshellarg("$dir/phpunit.log"), escapeshellarg("$dir/lab.log")), $out, $rc);
            $this->assertSame(0, $rc, implode("\n", $out));
            return implode("\n", $out);
        };
        $this->assertSame('tests: 10 passed, 0 failed', $summary("OK (4 tests, 9 assertions)\n"));
        $this->assertSame('tests: 7 passed, 1 failed', $summary("Tests: 2, Assertions: 1, Risky: 1.\n"));
        $this->assertSame('tests: 7 passed, 1 failed', $summary("Tests: 2, Assertions: 3, Warnings: 1.\n"));
        $this->assertSame('tests: 6 passed, 2 failed', $summary("Tests: 4, Assertions: 3, Errors: 1, Failures: 1, Skipped: 1, Incomplete: 1.\n"));
    }

    /**
     * `make bench BASELINE=REV` with a REV that cannot be built stops there. Before, the
     * failure was lost in a variable's assignment and the bench ran without its baseline,
     * ending 0.
     */
    public function testABaselineThatCannotBeBuiltStopsTheBench(): void
    {
        exec(sprintf('make --no-print-directory -C %s -o deps -o build bench BASELINE=no-such-revision BENCH_ARGS=no-such-group 2>&1',
            escapeshellarg(Run::root())), $out, $rc);
        $text = implode("\n", $out);
        $this->assertNotSame(0, $rc, $text);
        $this->assertStringContainsString('no-such-revision', $text);
        $this->assertStringNotContainsString('no group named', $text, 'bench/run.sh never ran');
    }

    /** A misspelt group is an error. Before, the bench measured nothing and said "all targets met". */
    public function testAnUnknownBenchGroupIsAnError(): void
    {
        exec(sprintf('%s/bench/run.sh no-such-group 2>&1', escapeshellarg(Run::root())), $out, $rc);
        $text = implode("\n", $out);
        $this->assertSame(2, $rc, $text);
        $this->assertStringContainsString('bench: no group named no-such-group (the groups: ', $text);
        $this->assertStringNotContainsString('targets met', $text);
    }
}
