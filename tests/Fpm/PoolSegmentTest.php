<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * Segment settings under real php-fpm: per-pool segment paths keep separate limits; a pool that
 * loads the extension itself gets its resilient.shm_path only when that line comes before the
 * extension line (php-fpm applies a pool's lines in reverse order and drops settings that are
 * not registered yet), and is refused loudly otherwise instead of silently sharing another
 * segment; a bad pool value is an error naming the key.
 */
final class PoolSegmentTest extends TestCase
{
    private ?ServiceProcess $fpm = null;
    private string $dir;

    protected function tearDown(): void
    {
        $this->fpm?->stop();
    }

    /** @param array<string, array<string,string>> $pools pool name => ini */
    private function start(array $pools, bool $extensionInMaster = true): string
    {
        $this->dir = Run::tempDir('pools');
        $master = Run::shmPath('pools-master-' . bin2hex(random_bytes(3)));
        $spec = [];
        foreach ($pools as $name => $ini) {
            $spec[$name] = ['workers' => 1, 'ini' => $ini];
        }
        $this->fpm = FpmMaster::start($this->dir, $spec, $master, $extensionInMaster);
        $this->waitFor(function () use ($pools) {
            foreach (array_keys($pools) as $name) {
                if (!file_exists("{$this->dir}/$name.sock")) {
                    return null;
                }
            }
            return true;
        }, 15.0, 'the pool sockets');
        return $master;
    }

    /** @param array<string,string> $env more FastCGI parameters (`PHP_VALUE`) */
    private function call(string $pool, array $query, array $env = []): array
    {
        $body = Fcgi::get("{$this->dir}/$pool.sock", Run::root() . '/tests/fixtures/fpm/segment.php', $query, env: $env);
        $data = json_decode($body, true);
        $this->assertIsArray($data, "pool $pool: $body\n" . @file_get_contents("{$this->dir}/fpm-error.log"));
        return $data;
    }

    public function testTwoPoolsWithDifferentShmPathsKeepSeparateLimits(): void
    {
        $a = Run::shmPath('pool-a-' . bin2hex(random_bytes(3)));
        $b = Run::shmPath('pool-b-' . bin2hex(random_bytes(3)));
        $master = $this->start(['a' => ['resilient.shm_path' => $a], 'b' => ['resilient.shm_path' => $b]]);
        $grants = [];
        foreach (['a', 'a', 'b', 'b', 'a'] as $pool) {
            $r = $this->call($pool, ['do' => 'consume', 'name' => 'shared-name']);
            $this->assertFalse($r['threw'], json_encode($r));
            $grants[] = $r['granted'];
        }
        // floor 1, ratio 0: one retry per segment. One segment would grant only the first call.
        $this->assertSame([true, false, true, false, false], $grants);
        $this->assertSame($a, $this->call('a', ['do' => 'info'])['shm_path']);
        clearstatcache();
        $this->assertFileExists($a);
        $this->assertFileExists($b);
        $this->assertFileDoesNotExist($master, 'no pool may fall back to the master\'s path');
    }

    public function testAPoolLoadingTheExtensionItselfNeedsShmPathBeforeTheExtensionLine(): void
    {
        $good = Run::shmPath('pool-good-' . bin2hex(random_bytes(3)));
        $lost = Run::shmPath('pool-lost-' . bin2hex(random_bytes(3)));
        $master = $this->start([
            'before' => ['resilient.shm_path' => $good, 'extension' => Run::extension()],
            'after' => ['extension' => Run::extension(), 'resilient.shm_path' => $lost],
        ], extensionInMaster: false);

        $r = $this->call('before', ['do' => 'consume', 'name' => 'x']);
        $this->assertFalse($r['threw'], json_encode($r));
        $this->assertSame($good, $this->call('before', ['do' => 'info'])['shm_path']);

        $r = $this->call('after', ['do' => 'consume', 'name' => 'x']);
        $this->assertTrue($r['threw'], 'a pool whose resilient.shm_path was dropped must not silently share a segment: ' . json_encode($r));
        $this->assertSame('Resilient\SharedMemoryError', $r['class']);
        $this->assertStringStartsWith('resilient.shm_path: ', $r['message']);
        $this->assertStringContainsString('before php_admin_value[extension]', $r['message']);
        clearstatcache();
        $this->assertFileExists($good);
        $this->assertFileDoesNotExist($lost);
        $this->assertFileDoesNotExist($master);
        fwrite(STDERR, "\n[pool extension line order] {$r['message']}\n");
    }

    /**
     * In a pool that loads the extension itself and sets no path, a request that sends a
     * refused path as a FastCGI `PHP_VALUE` is told what is wrong with that value (it was told
     * to reorder the pool's lines, which it had not written).
     */
    public function testARefusedPhpValuePathInAPoolLoadingTheExtensionIsNamed(): void
    {
        $this->start(['self' => ['extension' => Run::extension()]], extensionInMaster: false);
        $r = $this->call('self', ['do' => 'consume', 'name' => 'x'], ['PHP_VALUE' => 'resilient.shm_path=relative/x']);
        $this->assertTrue($r['threw'], json_encode($r));
        $this->assertStringContainsString("must be an absolute path", $r['message']);
        $this->assertStringContainsString("got 'relative/x' (from php.ini, -d, the FPM pool, .user.ini or a FastCGI PHP_VALUE)", $r['message']);
    }

    /** An unusable segment file under FPM: local guards, one log line per worker. */
    public function testAnUnusableSegmentDegradesAWorkerAndItsLogSaysSoOnce(): void
    {
        $path = Run::shmPath('pool-bad-' . bin2hex(random_bytes(3)));
        file_put_contents($path, str_repeat("\xAB", 4096)); // not a segment
        chmod($path, 0600);
        $this->start(['bad' => ['resilient.shm_path' => $path]]);
        $grants = [];
        for ($i = 0; $i < 3; $i++) {
            $r = $this->call('bad', ['do' => 'consume', 'name' => 'x']);
            $this->assertFalse($r['threw'], json_encode($r));
            $grants[] = $r['granted'];
        }
        $this->assertSame([true, false, false], $grants, 'the worker\'s local budget still limits');
        $info = $this->call('bad', ['do' => 'info']);
        $this->assertStringContainsString('bad magic', (string) $info['degraded']);
        $log = (string) file_get_contents("{$this->dir}/php-error-bad.log");
        $this->assertSame(1, substr_count($log, 'falling back to process-local guards'), $log);
        $this->assertSame(str_repeat("\xAB", 4096), file_get_contents($path), 'the file is left alone');
    }

    /**
     * A bad web cap is an error naming the key where the caps apply (Context, Client under a
     * web SAPI), never a silent default.
     */
    public function testABadWebCapIsAnErrorNamingTheKey(): void
    {
        $this->start(['web' => ['resilient.shm_path' => Run::shmPath('pool-web-' . bin2hex(random_bytes(3))), 'resilient.web_timeout' => 'abc']]);
        foreach ([1, 2] as $_) {
            $r = $this->call('web', ['do' => 'timeout']);
            $this->assertTrue($r['threw'], json_encode($r));
            $this->assertSame('ValueError', $r['class']);
            $this->assertStringStartsWith("resilient.web_timeout: must be a number of seconds", $r['message']);
            $this->assertStringContainsString("got 'abc'", $r['message']);
        }
    }

    /**
     * A refused resilient.context counts as auto (web under php-fpm), as its log line says,
     * whatever value was in force before it: a worker given `console` by one request's
     * PHP_ADMIN_VALUE (kept for its later requests) and then a request's refused `bogus` ran
     * that request as console before, without the web caps.
     */
    public function testARefusedContextCountsAsAutoNotAsTheValueBefore(): void
    {
        $this->start(['ctx' => ['resilient.shm_path' => Run::shmPath('pool-ctx-' . bin2hex(random_bytes(3)))]]);
        $console = $this->call('ctx', ['do' => 'timeout'], ['PHP_ADMIN_VALUE' => 'resilient.context=console']);
        $this->assertEquals(30.0, $console['timeout'], 'console: no web cap');
        $refused = $this->call('ctx', ['do' => 'timeout'], ['PHP_VALUE' => 'resilient.context=bogus']);
        $this->assertSame($console['pid'], $refused['pid'], 'the same worker');
        $this->assertFalse($refused['threw'], json_encode($refused));
        $this->assertEquals(10.0, $refused['timeout'], 'auto: a web request, capped at resilient.web_timeout');
        $this->waitFor(fn () => str_contains((string) @file_get_contents("{$this->dir}/php-error-ctx.log"), "resilient.context: must be") ?: null, 5.0, 'the refusal in the log');
    }

    public function testABadPoolValueIsAnErrorNamingTheKey(): void
    {
        $this->start([
            'slots' => ['resilient.shm_path' => Run::shmPath('pool-slots-' . bin2hex(random_bytes(3))), 'resilient.shm_slots' => 'abc'],
            'path' => ['resilient.shm_path' => 'relative/segment.shm'],
        ]);
        $r = $this->call('slots', ['do' => 'consume', 'name' => 'x']);
        $this->assertTrue($r['threw'], json_encode($r));
        $this->assertStringStartsWith("resilient.shm_slots: must be an integer between 1 and 65536, got 'abc'", $r['message']);
        $r = $this->call('path', ['do' => 'consume', 'name' => 'x']);
        $this->assertTrue($r['threw'], json_encode($r));
        $this->assertStringStartsWith("resilient.shm_path: must be an absolute path", $r['message']);
        $this->assertStringContainsString("got 'relative/segment.shm'", $r['message']);
    }

    /**
     * A refused pool value is set aside by a good ini_set() for that request only: what
     * ini_set() accepted (ini_restore() records the original it puts back) is forgotten at the
     * request's end. Remembered, a failed ini_set() in a later request of the worker (it marks
     * the entry modified, keeping the value) passed for a value set at runtime, and the refused
     * pool value was silently replaced by the default.
     */
    public function testARuntimeValueSetsARefusedPoolValueAsideForItsRequestOnly(): void
    {
        $this->start(['slots' => ['resilient.shm_path' => Run::shmPath('pool-aside-' . bin2hex(random_bytes(3))), 'resilient.shm_slots' => 'abc']]);
        $refused = "resilient.shm_slots: must be an integer between 1 and 65536, got 'abc'";
        $pids = [];
        foreach ([['64', true, true], ['junk', false, true], ['64', false, false], ['junk', false, true]] as [$value, $restore, $throws]) {
            $r = $this->call('slots', ['do' => 'set', 'key' => 'resilient.shm_slots', 'value' => $value, 'name' => 'x'] + ($restore ? ['restore' => '1'] : []));
            $this->assertSame($throws, $r['threw'], "ini_set('$value')" . ($restore ? ' and ini_restore()' : '') . ': ' . json_encode($r));
            if ($throws) {
                $this->assertStringStartsWith($refused, $r['message']);
            }
            $pids[$r['pid']] = true;
        }
        $this->assertCount(1, $pids, 'one worker served every request');
    }

    /**
     * A worker's next request after the file shrank (to nothing) goes through no old mapping:
     * each request checks the file at its first use. It used to be checked at most once a
     * second, and a request within that second faulted (SIGBUS: the worker died, the request
     * got no answer).
     */
    public function testTheNextRequestAfterTheFileShrankDoesNotFault(): void
    {
        $path = Run::shmPath('shrunk-fpm-' . bin2hex(random_bytes(3)));
        $this->start(['a' => ['resilient.shm_path' => $path]]);
        $first = $this->call('a', ['do' => 'consume', 'name' => 'before']);
        $this->assertFalse($first['threw'], json_encode($first));
        $fh = fopen($path, 'r+');
        ftruncate($fh, 0);
        fclose($fh);
        $next = $this->call('a', ['do' => 'consume', 'name' => 'after']);
        $this->assertFalse($next['threw'], json_encode($next));
        $this->assertSame($first['pid'], $next['pid'], 'one worker served both');
        $this->assertStringNotContainsString('signal', (string) @file_get_contents("{$this->dir}/fpm-error.log"));
    }
}
