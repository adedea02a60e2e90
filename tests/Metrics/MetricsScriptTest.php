<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * `php/bin/resilient-metrics` (the exposition without Laravel) answers every input with one of
 * its documented exit codes and a one-line message, never an uncaught exception's trace: a
 * textfile collector or a cron job around it reads the code.
 */
final class MetricsScriptTest extends TestCase
{
    private static function script(array $args, array $ini = []): \Resilient\Tests\Harness\ProcessResult
    {
        return PhpProcess::runScript(Run::root() . '/php/bin/resilient-metrics', $args, $ini);
    }

    /** @return iterable<string, array{list<string>, int, string}> */
    public static function inputs(): iterable
    {
        yield 'an empty name' => [['--reset', ''], 64, 'name: must not be empty'];
        yield 'a name over 64 bytes' => [['--reset', str_repeat('n', 70)], 64, 'name: '];
        yield 'a name with a line break' => [['--reset', "a\nb"], 64, 'name: '];
        yield 'no name' => [['--reset'], 64, 'usage: resilient-metrics'];
        yield 'an unknown flag' => [['--bogus'], 64, 'usage: resilient-metrics'];
        yield 'a name without metrics' => [['--reset', Run::name('never-used')], 1, ''];
    }

    /** @dataProvider inputs */
    public function testEachInputEndsWithItsDocumentedExitCode(array $args, int $code, string $message): void
    {
        $r = self::script($args);
        $this->assertSame($code, $r->exitCode, $r->describe());
        $this->assertStringNotContainsString('Uncaught', $r->stderr . $r->stdout);
        $this->assertStringContainsString($message, $r->stderr);
        $this->assertLessThanOrEqual(1, substr_count(rtrim($r->stderr), "\n"), 'one line');
    }

    /**
     * Without shm_required the guards fall back to this process's own segment (the degraded
     * mode); the metrics must not: an exposition of this process's empty counters, exit 0, would
     * replace a textfile collector's real figures with "no upstreams".
     */
    public function testAnUnusableSegmentIsExitTwoNeverThisProcesssOwnCounters(): void
    {
        $path = Run::tempDir('metrics-script') . '/foreign.shm';
        file_put_contents($path, random_bytes(4096));
        chmod($path, 0600);
        foreach ([[], ['--json'], ['--reset', 'shipping']] as $args) {
            $r = self::script($args, ['resilient.shm_path' => $path, 'resilient.shm_required' => '0']);
            $this->assertSame(2, $r->exitCode, $r->describe());
            $this->assertSame('', $r->stdout, $r->describe());
            $this->assertStringNotContainsString('Uncaught', $r->stderr);
            $this->assertStringContainsString("resilient-metrics: Resilient\\Metrics::", $r->stderr);
            $this->assertStringContainsString($path, $r->stderr);
        }
    }

    /**
     * Run as another user than PHP-FPM's, or before any worker recorded anything, the script
     * finds no segment. It must not create one: a file made by root at FPM's
     * resilient.shm_path would lock FPM's workers out of it.
     */
    public function testAMissingSegmentIsReportedAndNotCreated(): void
    {
        $path = Run::tempDir('metrics-script') . '/not-yet.shm';
        $ini = ['resilient.shm_path' => $path];
        $cases = [[[], 0, ''], [['--json'], 0, "{}\n"], [['--reset', 'shipping'], 1, '']];
        foreach ($cases as [$args, $code, $stdout]) {
            $r = self::script($args, $ini);
            $this->assertSame($code, $r->exitCode, $r->describe());
            $this->assertSame($stdout, $r->stdout, $r->describe());
            if ($args !== ['--reset', 'shipping']) {
                $this->assertStringContainsString("no shared memory segment at $path yet", $r->stderr);
            }
            $this->assertFileDoesNotExist($path, implode(' ', $args) . ' created the segment');
        }
        $r = self::script(['--reset', ''], $ini);
        $this->assertSame(64, $r->exitCode, 'a bad name is a usage error without a segment too: ' . $r->describe());
        $this->assertFileDoesNotExist($path);
    }

    public function testANameWithOnlyAFunnelHasNoMetricsToReset(): void
    {
        $name = Run::name('funnel-only');
        $w = PhpProcess::runCode(sprintf('new Resilient\\Funnel(%s, limit: 2); echo "made";', var_export($name, true)));
        $this->assertSame('made', $w->stdout, $w->describe());
        $r = self::script(['--reset', $name]);
        $this->assertSame(1, $r->exitCode, $r->describe());
    }

    public function testAnUnusableSegmentWithShmRequiredIsExitTwo(): void
    {
        $dir = Run::tempDir('metrics-script');
        $r = self::script(['--json'], [
            'resilient.shm_path' => "$dir/missing-dir/segment.shm",
            'resilient.shm_required' => '1',
        ]);
        $this->assertSame(2, $r->exitCode, $r->describe());
        $this->assertStringNotContainsString('Uncaught', $r->stderr . $r->stdout);
        $this->assertStringContainsString('resilient-metrics: ', $r->stderr);
        $this->assertStringContainsString("$dir/missing-dir/segment.shm", $r->stderr);
    }
}
