<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 7 (segment file): a segment file that is corrupt, of another layout version, too
 * small, owned by another user, readable or writable by group/others, a symlink or not a regular
 * file is refused with a clear exception naming the file (with resilient.shm_required=1) — never
 * mapped blindly, never a crash, and never modified. Without shm_required the same files put the
 * process in the degraded mode (process-local guards, said once). Each case runs in a child
 * process whose exit code and output are checked.
 */
final class SegmentFileTest extends TestCase
{
    private const USE_IT = '$f = new Resilient\Funnel("seg", limit: 1); return $f->inFlight();';

    /** Run the use-the-segment code in a child pointed at $path; return what it threw. */
    private function useSegment(string $path, array $ini = []): array
    {
        $ini += ['resilient.shm_required' => '1'];
        $r = PhpProcess::runScript('expect_throw.php', [self::USE_IT], ['resilient.shm_path' => $path] + $ini, 20);
        $this->assertSame(0, $r->exitCode, "the child must not crash:\n" . $r->describe());
        $this->assertStringNotContainsString('panicked', $r->stderr, $r->describe());
        return $r->json();
    }

    private function assertRefused(string $path, array $result, string $problem): void
    {
        $this->assertTrue($result['threw'], "a $problem segment file was used without complaint: " . json_encode($result));
        $this->assertContains(\RuntimeException::class, [$result['class'], ...$result['parents']], json_encode($result));
        $this->assertStringContainsString($path, $result['message'], 'the message must name the file');
        fwrite(STDERR, "\n[segment: $problem] {$result['class']}: {$result['message']}\n");
    }

    /** A valid segment made by the extension itself. */
    private function validSegment(string $tag): string
    {
        $path = Run::shmPath($tag);
        $ok = $this->useSegment($path);
        $this->assertFalse($ok['threw'], 'a fresh segment must work: ' . json_encode($ok));
        $this->assertSame(0, $ok['returned']);
        $st = stat($path);
        $this->assertSame(0600, $st['mode'] & 0777, 'the segment must be created with mode 0600');
        return $path;
    }

    public function testFreshSegmentIsCreatedPrivate(): void
    {
        $this->validSegment('fresh-' . bin2hex(random_bytes(3)));
    }

    public function testCorruptFileIsRefusedAndLeftUntouched(): void
    {
        $path = Run::shmPath('corrupt-' . bin2hex(random_bytes(3)));
        file_put_contents($path, random_bytes(256 * 1024));
        chmod($path, 0600);
        $before = md5_file($path);
        $this->assertRefused($path, $this->useSegment($path), 'corrupt');
        $this->assertSame($before, md5_file($path), 'a refused file must not be modified');
    }

    public function testWrongMagicIsRefused(): void
    {
        $path = $this->validSegment('magic-' . bin2hex(random_bytes(3)));
        $fh = fopen($path, 'r+');
        fwrite($fh, 'NOTRESIL');
        fclose($fh);
        $this->assertRefused($path, $this->useSegment($path), 'wrong magic');
    }

    /** 6 = the previous layout (its breaker's streak word is encoded differently): never misread. */
    public function testOtherLayoutVersionIsRefused(): void
    {
        foreach ([6, 99] as $version) {
            $path = $this->validSegment('version-' . bin2hex(random_bytes(3)));
            $fh = fopen($path, 'r+');
            fseek($fh, 8); // Header: magic u64, then version u32 (crates/core/src/layout.rs)
            fwrite($fh, pack('V', $version));
            fclose($fh);
            $result = $this->useSegment($path);
            $this->assertRefused($path, $result, "layout version $version");
            $this->assertStringContainsString("layout version $version", $result['message']);
        }
    }

    public function testTruncatedFileIsRefused(): void
    {
        $path = $this->validSegment('short-' . bin2hex(random_bytes(3)));
        $fh = fopen($path, 'r+');
        ftruncate($fh, 100);
        fclose($fh);
        $this->assertRefused($path, $this->useSegment($path), 'truncated');
    }

    public function testFileOfAnotherUserIsRefused(): void
    {
        if (posix_geteuid() !== 0) {
            $this->markTestSkipped('needs root to chown the file to another user');
        }
        $path = $this->validSegment('owner-' . bin2hex(random_bytes(3)));
        $this->assertTrue(chown($path, 'nobody'));
        clearstatcache();
        $result = $this->useSegment($path);
        $this->assertRefused($path, $result, 'other owner');
        $this->assertMatchesRegularExpression('/own|uid|user/i', $result['message']);
    }

    /** @return iterable<string,array{int}> */
    public static function unsafeModes(): iterable
    {
        yield 'world-writable' => [0606];
        yield 'group-writable' => [0620];
    }

    /** @dataProvider unsafeModes */
    public function testFileWritableByOthersIsRefused(int $mode): void
    {
        $path = $this->validSegment('mode-' . bin2hex(random_bytes(3)));
        chmod($path, $mode);
        clearstatcache();
        $result = $this->useSegment($path);
        $this->assertRefused($path, $result, sprintf('mode %o', $mode));
        $this->assertMatchesRegularExpression('/writ|mode|perm/i', $result['message']);
        clearstatcache();
        $this->assertSame($mode, fileperms($path) & 0777, 'the extension must not "fix" the mode behind the user\'s back');
    }

    /** @return iterable<string,array{int}> */
    public static function readableModes(): iterable
    {
        yield 'world-readable 0644' => [0644];
        yield 'group-readable 0640' => [0640];
        yield 'other-readable 0604' => [0604];
    }

    /**
     * Metrics live in the segment, so a file others can read is refused too.
     *
     * @dataProvider readableModes
     */
    public function testFileReadableByOthersIsRefused(int $mode): void
    {
        $path = $this->validSegment('read-' . bin2hex(random_bytes(3)));
        chmod($path, $mode);
        clearstatcache();
        $result = $this->useSegment($path);
        $this->assertRefused($path, $result, sprintf('mode %o', $mode));
        $this->assertStringContainsString(sprintf('mode %o', $mode), $result['message']);
    }

    /** Without shm_required, an unusable file means local guards, said once. */
    public function testUnusableFileDegradesToLocalGuardsAndSaysSoOnce(): void
    {
        $path = $this->validSegment('degrade-' . bin2hex(random_bytes(3)));
        chmod($path, 0644);
        $code = '$a = new Resilient\Funnel("a", limit: 1); $b = new Resilient\Funnel("b", limit: 2);
            $l = $a->tryAcquire(background: false); $second = $a->tryAcquire(background: false);
            $budget = new Resilient\RetryBudget("r", ratio: 0.0, floor: 1);
            return ["degraded" => [$a->isDegraded(), $b->isDegraded(), $budget->isDegraded(), $budget->stats()["degraded"]],
                "reason" => Resilient\Funnel::degradedReason(), "first" => $l !== null, "second" => $second !== null,
                "in_flight" => $a->inFlight(), "consume" => [$budget->tryConsume(), $budget->tryConsume()]];';
        $r = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => $path, 'resilient.shm_required' => '0'], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertFalse($out['threw'], json_encode($out));
        $v = $out['returned'];
        $this->assertSame([true, true, true, true], $v['degraded']);
        $this->assertStringContainsString($path, $v['reason']);
        $this->assertStringContainsString('mode 644', $v['reason']);
        $this->assertTrue($v['first']);
        $this->assertFalse($v['second'], 'the local funnel must still limit this process');
        $this->assertSame(1, $v['in_flight']);
        $this->assertSame([true, false], $v['consume'], 'the local budget must still limit this process');
        // CLI without error_log: PHP's log goes to stderr. Exactly one line for four guards.
        $this->assertSame(1, substr_count($r->stderr, 'falling back to process-local guards'), $r->stderr);
        clearstatcache();
        $this->assertSame(0644, fileperms($path) & 0777, 'the refused file must be left alone');
    }

    public function testSymlinkIsRefused(): void
    {
        $target = $this->validSegment('target-' . bin2hex(random_bytes(3)));
        $link = Run::shmPath('link-' . bin2hex(random_bytes(3)));
        symlink($target, $link);
        $this->assertRefused($link, $this->useSegment($link), 'symlink');
    }

    public function testDirectoryIsRefused(): void
    {
        $path = Run::shmPath('dir-' . bin2hex(random_bytes(3)));
        mkdir($path, 0700);
        $this->assertRefused($path, $this->useSegment($path), 'directory');
    }
}
