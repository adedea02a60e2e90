<?php

declare(strict_types=1);

namespace Resilient\Tests\Deadline;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Nesting depth: Deadline::within nested about 5,100 deep once overflowed the C stack (SIGSEGV).
 * Nesting is now limited to 1,000 scopes, and to what leaves 256 KB of C stack free (a 1 MB
 * stack holds about 450): deeper is a clear \Error, the stack of deadlines is unwound on the
 * way out, and the process carries on (exit 0). Runs in a child process so a
 * crash shows as a signal instead of killing PHPUnit.
 */
final class NestingTest extends TestCase
{
    private function nest(int $depth): array
    {
        $code = sprintf('
            function nest(int $n, array &$reached) { $reached[0] = max($reached[0], $n); return $n === 0 ? Resilient\Deadline::remaining() : Resilient\Deadline::within(30.0, fn () => nest($n - 1, $reached)); }
            $reached = [0]; $depth = %d;
            try { $r = ["returned" => nest($depth, $reached)]; }
            catch (Throwable $e) { $r = ["class" => get_class($e), "message" => $e->getMessage()]; }
            $r["after"] = Resilient\Deadline::remaining();
            $r["again"] = Resilient\Deadline::within(1.0, fn () => Resilient\Deadline::remaining() > 0.5);
            echo json_encode($r);', $depth);
        $res = PhpProcess::runCode($code, [], 60);
        $this->assertNull($res->signal, "nesting $depth deep crashed PHP: " . $res->describe());
        $this->assertSame(0, $res->exitCode, $res->describe());
        return $res->json();
    }

    /** @return iterable<string,array{int}> */
    public static function tooDeep(): iterable
    {
        yield '1,001 (one past the limit)' => [1_001];
        yield '5,100 (crashed before)' => [5_100];
        yield '100,000' => [100_000];
    }

    /** @dataProvider tooDeep */
    public function testTooDeepIsAClearErrorAndTheProcessCarriesOn(int $depth): void
    {
        $r = $this->nest($depth);
        $this->assertSame('Error', $r['class'] ?? null, json_encode($r));
        $this->assertSame('Deadline::within: nested more than 1000 deep; infinite recursion?', $r['message']);
        $this->assertNull($r['after'], 'every scope must be popped on the way out');
        $this->assertTrue($r['again'], 'within() must work normally afterwards');
    }

    /** With a small C stack (1 MB) 1,000 scopes do not fit: the stack left is checked too. */
    public function testASmallStackIsAClearErrorToo(): void
    {
        $code = 'function nest(int $n) { return $n === 0 ? 0 : Resilient\Deadline::within(30.0, fn () => nest($n - 1)); }
            try { nest(100000); } catch (Error $e) { echo json_encode(["message" => $e->getMessage(), "after" => Resilient\Deadline::remaining()]); }';
        $cmd = ['bash', '-c', 'ulimit -s 1024 && exec "$0" "$@"', Run::root() . '/tests/harness/php.sh', '-r', $code];
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, Run::root());
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        $rc = proc_close($proc);
        $this->assertSame(0, $rc, "1 MB stack: exit $rc (11 or 139 = SIGSEGV)\n$stdout\n$stderr");
        $r = json_decode($stdout, true);
        $this->assertMatchesRegularExpression('/^Deadline::within: only \d+ KB of C stack left at \d+ nested scopes; infinite recursion\?$/', $r['message'] ?? '', $stdout);
        $this->assertNull($r['after']);
    }

    /**
     * Inside a Fiber the stack is the fiber's own (2 MiB by default, `fiber.stack_size`), not
     * the thread's: it is measured there too, so a recursion through `within` (here with an
     * `array_map` between levels, as PHP code has) ends with the same \Error, not SIGSEGV.
     *
     * @return iterable<string,array{string}>
     */
    public static function fiberStacks(): iterable
    {
        yield 'default' => [''];
        yield '1M' => ['1M'];
        yield '512K' => ['512K'];
    }

    /** @dataProvider fiberStacks */
    public function testTooDeepInsideAFiberIsAClearErrorToo(string $stackSize): void
    {
        $code = 'function nest(int $n) { return $n === 0 ? 0 : Resilient\Deadline::within(30.0, fn () => array_map(fn () => nest($n - 1), [1])); }
            $f = new Fiber(function () { try { nest(100000); } catch (Error $e) { return ["message" => $e->getMessage(), "after" => Resilient\Deadline::remaining()]; } });
            $f->start();
            echo json_encode($f->getReturn() + ["outside" => Resilient\Deadline::remaining()]);';
        $res = PhpProcess::runCode($code, $stackSize === '' ? [] : ['fiber.stack_size' => $stackSize], 60);
        $this->assertNull($res->signal, 'crashed: ' . $res->describe());
        $this->assertSame(0, $res->exitCode, $res->describe());
        $r = $res->json();
        $this->assertMatchesRegularExpression('/^Deadline::within: (only \d+ KB of C stack left at \d+ nested scopes|nested more than 1000 deep); infinite recursion\?$/', $r['message']);
        $this->assertNull($r['after']);
        $this->assertNull($r['outside']);
    }

    public function testTheLimitItselfIsAllowed(): void
    {
        $r = $this->nest(1_000);
        $this->assertArrayNotHasKey('class', $r, json_encode($r));
        $this->assertGreaterThan(29.0, $r['returned']);
        $this->assertNull($r['after']);
    }
}
