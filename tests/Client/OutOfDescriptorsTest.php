<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A process out of file descriptors (a leak, `ulimit -n`) before its I/O runtime started (a new
 * worker, or a child of `pcntl_fork`, which starts its own) cannot start it. Its calls end as a
 * connect this host lacks the resources for does: `UpstreamFailed` with the failure 'request',
 * given to the `fallback`; a pool's requests each end so, as values. A client can still be made
 * then, and its calls end so too. Before, `new Client` and each call threw a bare `\Exception`
 * that no `catch (Resilient\Unavailable)` and no `fallback` saw.
 */
final class OutOfDescriptorsTest extends TestCase
{
    /**
     * Runs `$code` (which sets `$out`) in a process limited to 64 descriptors, after `$setup`,
     * and `$after` once the descriptors are given back; `$out`.
     */
    private function runStarved(string $setup, string $code, string $after = ''): array
    {
        $starve = '$fds = []; while (($f = @fopen("/dev/null", "r")) !== false) { $fds[] = $f; }';
        $script = $setup . $starve . $code . ' $fds = []; ' . $after . ' echo json_encode($out);';
        $cmd = ['bash', '-c', 'ulimit -n 64 && exec "$0" "$@"', Run::root() . '/tests/harness/php.sh',
            '-d', 'resilient.shm_path=' . ini_get('resilient.shm_path'), '-r', $script];
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, Run::root());
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($proc), "$stdout\n$stderr");
        return json_decode($stdout, true, flags: JSON_THROW_ON_ERROR);
    }

    private function options(): string
    {
        return var_export(['base_url' => 'http://127.0.0.1:9/api?token=secret', 'max_attempts' => 3], true);
    }

    public function testACallInAForkedChildThatCannotStartItsRuntimeEndsUnavailable(): void
    {
        // The parent's client made (and its runtime started) before the fork; the child starves.
        $setup = sprintf('$c = new Resilient\Client(%s, %s + ["fallback" => fn (Resilient\Unavailable $e) => ["fell back", get_class($e), $e->failure(), str_contains($e->getMessage(), "not sent (0 attempts)"), $e->getMessage()]]);
            $plain = new Resilient\Client(%1$s, %2$s);
            try { $plain->get("/warm"); } catch (Resilient\Unavailable) {}
            if (($pid = pcntl_fork()) > 0) { pcntl_waitpid($pid, $status); exit(pcntl_wexitstatus($status)); }
            $before = Resilient\Metrics::snapshot()[%1$s];',
            var_export($name = Run::name('nofd'), true), $this->options());
        $out = $this->runStarved($setup, '
            $thrown = null;
            try { $plain->get("/x"); } catch (Resilient\Unavailable $e) { $thrown = [get_class($e), $e->failure(), str_contains($e->getMessage(), "not sent (0 attempts)")]; }
            $pool = array_map(fn ($r) => [get_class($r), $r->failure()], $plain->pool(["a" => ["GET", "/a"], "b" => ["GET", "/b"]]));
            $out = ["fallback" => $c->get("/x"), "thrown" => $thrown, "pool" => $pool];', sprintf('
            $now = Resilient\Metrics::snapshot()[%s];
            $out["counted"] = array_map(fn ($k) => $now[$k] - $before[$k], ["originals" => "originals", "attempts" => "attempts", "fallbacks" => "fallbacks"]);', var_export($name, true)));

        [$said, $class, $failure, $notSent, $message] = $out['fallback'];
        $this->assertSame('fell back', $said);
        $this->assertSame('Resilient\UpstreamFailed', $class);
        $this->assertSame('request', $failure, 'ours, not the upstream\'s');
        $this->assertTrue($notSent, 'nothing was sent');
        $this->assertStringContainsString('cannot start the I/O runtime', $message);
        $this->assertStringStartsWith('GET http://127.0.0.1:9/api/x: request error; not sent', $message);
        $this->assertStringNotContainsString('secret', $message);
        $this->assertSame(['Resilient\UpstreamFailed', 'request', true], $out['thrown']);
        $this->assertSame(['a' => ['Resilient\UpstreamFailed', 'request'], 'b' => ['Resilient\UpstreamFailed', 'request']], $out['pool']);
        $this->assertSame(['originals' => 4, 'attempts' => 0, 'fallbacks' => 1], $out['counted'], 'each call counted, none sent');
    }

    public function testAClientMadeWhenTheRuntimeCannotStartEndsItsCallsUnavailable(): void
    {
        $out = $this->runStarved('', sprintf('
            $c = new Resilient\Client(%s, %s + ["fallback" => fn (Resilient\Unavailable $e) => [get_class($e), $e->failure(), str_contains($e->getMessage(), "not sent (0 attempts)")]]);
            $out = $c->get("/x");', var_export(Run::name('nofd'), true), $this->options()));
        $this->assertSame(['Resilient\UpstreamFailed', 'request', true], $out);
    }
}
