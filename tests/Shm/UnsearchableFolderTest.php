<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The segment in a 0700 folder (docs/shared-memory.md's advice), read by a process of another
 * user: it cannot see the file, which is there and in use. The metrics must say the process
 * cannot use the segment (a metrics route answers 500), not "nothing recorded": the file system
 * answered "permission denied", which was read as "no such file".
 *
 * Needs root (setpriv, chown): the reader runs as uid 1 ("daemon").
 */
final class UnsearchableFolderTest extends TestCase
{
    private const READER_UID = 1;

    private string $dir;

    protected function setUp(): void
    {
        $this->needSetpriv();
        $this->dir = '/dev/shm/resilient-test-' . Run::id() . '-folder-' . bin2hex(random_bytes(3));
        mkdir($this->dir, 0700);
    }

    protected function tearDown(): void
    {
        if (isset($this->dir)) {
            @unlink("{$this->dir}/seg.shm");
            @rmdir($this->dir);
        }
    }

    public function testAReaderThatCannotSearchTheFolderIsToldSoNotNothingRecorded(): void
    {
        $path = "{$this->dir}/seg.shm";
        $made = PhpProcess::runCode('Resilient\Metrics::recordSynthetic("in-use", 3);', ['resilient.shm_path' => $path]);
        $this->assertSame(0, $made->exitCode, $made->describe());
        $this->assertFileExists($path);

        $code = '$out = [];
            foreach (["snapshot" => fn () => Resilient\Metrics::snapshot(), "prometheus" => fn () => Resilient\Metrics::prometheus(),
                      "reset" => fn () => Resilient\Metrics::reset("in-use")] as $what => $read) {
                try { $out[$what] = "answered " . json_encode($read()); } catch (Resilient\SharedMemoryError $e) { $out[$what] = $e->getMessage(); }
            }
            echo json_encode($out);';
        [$rc, $stdout, $stderr] = $this->phpAs(self::READER_UID, ['-d', "resilient.shm_path=$path", '-d', 'log_errors=0', '-r', $code]);
        $this->assertSame(0, $rc, "stdout: $stdout\nstderr: $stderr");
        $out = json_decode($stdout, true);
        $this->assertIsArray($out, "stdout: $stdout\nstderr: $stderr");
        foreach (['snapshot', 'prometheus', 'reset'] as $what) {
            $this->assertStringContainsString("Resilient\\Metrics::$what(): the host's counters are in the shared memory segment, which this process cannot use", $out[$what], $what);
            $this->assertStringContainsString('Permission denied', $out[$what], $what);
        }

        // The textfile collector's script: exit 2 with the reason, not "no segment yet", exit 0.
        [$rc, $stdout, $stderr] = $this->phpAs(self::READER_UID, ['-d', "resilient.shm_path=$path", '-d', 'log_errors=0',
            Run::root() . '/php/bin/resilient-metrics', '--prometheus']);
        $this->assertSame(2, $rc, "stdout: $stdout\nstderr: $stderr");
        $this->assertSame('', $stdout);
        $this->assertStringContainsString('Permission denied', $stderr);
        $this->assertStringNotContainsString('yet', $stderr);
    }
}
