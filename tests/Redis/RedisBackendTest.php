<?php

declare(strict_types=1);

namespace Resilient\Tests\Redis;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Client;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Http\HttpTestCase;

/**
 * The Redis backend with real processes: a redis-server started here on its own loopback port,
 * "hosts" played by groups of CLI processes that each have their own shared-memory segment
 * (resilient.shm_path), the mock upstream counting what reaches it (its own concurrency count).
 */
final class RedisBackendTest extends HttpTestCase
{
    private static ?ServiceProcess $redis = null;
    private static int $port = 0;

    public static function setUpBeforeClass(): void
    {
        self::$port = Run::freePort();
        self::startRedis();
    }

    public static function tearDownAfterClass(): void
    {
        self::$redis?->stop();
        self::$redis = null;
    }

    private static function startRedis(): void
    {
        $dir = Run::tempDir('redis');
        self::$redis = ServiceProcess::start(
            ['redis-server', '--bind', '127.0.0.1', '--port', (string) self::$port, '--save', '', '--appendonly', 'no', '--enable-debug-command', 'local', '--dir', $dir],
            $dir . '/redis-' . hrtime(true),
        );
        $until = microtime(true) + 5;
        while (@fsockopen('127.0.0.1', self::$port) === false) {
            if (microtime(true) > $until) {
                throw new \RuntimeException('redis-server did not start');
            }
            usleep(10_000);
        }
    }

    private static function cli(string ...$args): string
    {
        $cmd = 'redis-cli -p ' . self::$port . ' ' . implode(' ', array_map('escapeshellarg', $args));
        return trim((string) shell_exec($cmd));
    }

    private function url(): string
    {
        return 'redis://127.0.0.1:' . self::$port . '/0?prefix=' . Run::id() . ':';
    }

    /**
     * Runs `count($hosts)` groups of processes, each group with its own segment, every process
     * calling until $seconds from now. @return list<array<string,mixed>> the answers
     */
    private function runHosts(array $options, string $key, int $perHost, float $seconds, ?callable $during = null, int $hosts = 2, int $pauseUs = 1000): array
    {
        $name = Run::name('redis');
        $this->last = $name;
        $go = Run::dir() . '/go-' . $name;
        $procs = [];
        for ($h = 0; $h < $hosts; $h++) {
            $shm = Run::shmPath("redis-host$h-" . substr($name, -8));
            for ($i = 0; $i < $perHost; $i++) {
                $spec = base64_encode(json_encode(['name' => $name, 'options' => $options + ['base_url' => $this->up->base($key)], 'path' => '/x', 'go_file' => $go, 'pause_us' => $pauseUs]));
                $procs[] = PhpProcess::script(__DIR__ . '/fixtures/host.php', [$spec], ['resilient.shm_path' => $shm]);
            }
        }
        foreach ($procs as $p) {
            $this->assertTrue($p->waitForOutput(fn (string $o) => str_contains($o, 'ready'), 20.0), 'a host process did not start');
        }
        file_put_contents($go, json_encode(['stop_at' => microtime(true) + $seconds]));
        if ($during !== null) {
            $during();
        }
        $answers = [];
        foreach ($procs as $p) {
            $r = $p->wait($seconds + 20);
            $lines = array_values(array_filter(explode("\n", trim($r->stdout))));
            $answer = json_decode((string) end($lines), true);
            $this->assertIsArray($answer, $r->describe());
            $answers[] = $answer;
        }
        return $answers;
    }

    /** The most attempts the upstream saw at once for $key. */
    private function maxConcurrent(string $key): int
    {
        $attempts = $this->up->attempts($key, 1);
        return max(array_map(fn ($a) => (int) $a['max_concurrent'], $attempts));
    }

    public function testTwoHostsShareOneFunnelOnRedisButNotOnSharedMemory(): void
    {
        $funnel = ['funnel' => ['limit' => 4, 'wait' => 0.0], 'timeout' => 2.0, 'max_attempts' => 1, 'budget' => false];
        $onRedis = $this->up->key('funnel-redis');
        $this->up->script($onRedis, [['status' => 200, 'delay_ms' => 40]]);
        $answers = $this->runHosts($funnel + ['backend' => $this->url(), 'on_backend_error' => 'closed'], $onRedis, 6, 1.5);
        $redisMax = $this->maxConcurrent($onRedis);
        $ok = array_sum(array_map(fn ($a) => $a['classes']['Resilient\\Response'] ?? 0, $answers));
        $full = array_sum(array_map(fn ($a) => $a['classes']['Resilient\\FunnelFull'] ?? 0, $answers));
        $this->assertSame(0, array_sum(array_column($answers, 'backend_fallbacks')), 'Redis answered every time');
        $this->assertSame('0', self::cli('ZCARD', Run::id() . ':{' . $this->last . '}:funnel'), 'every slot given back');
        $this->assertLessThanOrEqual(4, $redisMax, 'one limit of 4 across both hosts');
        $this->assertGreaterThanOrEqual(3, $redisMax, 'the limit was reached');
        $this->assertGreaterThan(0, $full);

        $onShm = $this->up->key('funnel-shm');
        $this->up->script($onShm, [['status' => 200, 'delay_ms' => 40]]);
        $this->runHosts($funnel + ['backend' => 'shm'], $onShm, 6, 1.5);
        $shmMax = $this->maxConcurrent($onShm);
        $this->assertGreaterThan(4, $shmMax, 'each host its own limit of 4');
        $this->assertLessThanOrEqual(8, $shmMax);
        fwrite(STDERR, sprintf("\n[redis] 2 hosts × 6 processes, funnel limit 4: upstream saw at most %d at once on Redis (%d answered, %d funnel full), %d on shared memory\n", $redisMax, $ok, $full, $shmMax));
    }

    public function testOneBudgetAcrossBothHostsObeysFloorPlusRatio(): void
    {
        $key = $this->up->key('budget');
        $this->up->script($key, [['status' => 503]]);
        // floor 3, ratio 0.1; every call fails and wants one retry.
        $options = ['backend' => $this->url(), 'on_backend_error' => 'closed', 'timeout' => 2.0, 'max_attempts' => 2,
            'backoff' => ['base' => 0.0, 'cap' => 0.001], 'budget' => ['ratio' => 0.1, 'floor' => 3, 'window' => 60.0]];
        $answers = $this->runHosts($options, $key, 2, 1.0, null, 2, 5000);
        $calls = array_sum(array_column($answers, 'calls'));
        $attempts = count($this->up->attempts($key, $calls));
        $retries = $attempts - $calls;
        $allowed = 3 + (int) floor(0.1 * $calls + 1e-9);
        $this->assertSame(0, array_sum(array_column($answers, 'backend_fallbacks')));
        $this->assertGreaterThan(40, $calls);
        $this->assertSame($allowed, $retries, "$calls originals across 2 hosts: floor 3 + 0.1 × originals retries");
        fwrite(STDERR, sprintf("\n[redis] budget across 2 hosts: %d originals, %d retries sent (floor 3 + 0.1 × originals = %d)\n", $calls, $retries, $allowed));
    }

    /** @return array<string, array{string}> */
    public function behaviours(): array
    {
        return ['local' => ['local'], 'open' => ['open'], 'closed' => ['closed']];
    }

    /** @dataProvider behaviours */
    public function testRedisKilledAndRestartedMidRun(string $behaviour): void
    {
        $key = $this->up->key('outage-' . $behaviour);
        $this->up->script($key, [['status' => 200, 'delay_ms' => 20]]);
        $deadline = 0.5;
        $options = ['backend' => $this->url(), 'on_backend_error' => $behaviour, 'hosts' => 2, 'deadline' => $deadline, 'timeout' => 0.4, 'max_attempts' => 1,
            'budget' => false, 'funnel' => ['limit' => 4, 'wait' => 0.2, 'lease' => 1.0]];
        $answers = $this->runHosts($options, $key, 3, 3.0, function (): void {
            usleep(800_000);
            self::$redis->stop(); // TERM, then KILL: the server is gone mid-run
            usleep(800_000);
            self::startRedis();
        });
        $worstOver = max(array_column($answers, 'worst_over_ms'));
        $fallbacks = array_sum(array_column($answers, 'backend_fallbacks'));
        $count = fn (string $class) => array_sum(array_map(fn ($a) => $a['classes'][$class] ?? 0, $answers));
        $ok = $count('Resilient\\Response');
        $full = $count('Resilient\\FunnelFull');
        $calls = array_sum(array_column($answers, 'calls'));
        $this->assertLessThan(50.0, $worstOver, 'every call ended within its deadline (give or take the client returning)');
        $this->assertGreaterThan(0, $fallbacks, 'the fallback is counted in metrics');
        $this->assertSame($calls, $ok + $full, 'answered or funnel full, nothing else');
        $max = $this->maxConcurrent($key);
        switch ($behaviour) {
            case 'local':
                $this->assertGreaterThan($calls / 2, $ok, 'local: the calls went on');
                // 4 / 2 hosts on each of 2 hosts. At a switch (Redis gone, or back) the slots held
                // on one side are not seen by the other for one attempt's time: at most 2 × 4.
                $this->assertLessThanOrEqual(8, $max);
                break;
            case 'open':
                // While Redis was gone every call went out (6 at once, over the limit of 4); a
                // few waits of 0.2 s may have ended full while Redis was up.
                $this->assertGreaterThan(4, $max, 'open: no limit while Redis was gone');
                $this->assertGreaterThan($calls * 0.95, $ok);
                break;
            case 'closed':
                $this->assertGreaterThan(0, $full, 'closed: refused as funnel full while Redis was gone');
                $this->assertGreaterThan(0, $ok, 'before and after the outage');
                $this->assertLessThanOrEqual(4, $max, 'closed: never over the limit');
                break;
        }
        // Redis is back and used again: no slot left held once the run is over.
        $this->assertSame('0', self::cli('ZCARD', Run::id() . ':{' . $this->lastName() . '}:funnel'));
        fwrite(STDERR, sprintf("\n[redis] killed and restarted mid-run, on_backend_error=%s: %d calls, %d answered, %d funnel full, %d fallback decisions, at most %d at once, worst %.1f ms past the %d ms deadline\n", $behaviour, $calls, $ok, $full, $fallbacks, $max, $worstOver, $deadline * 1000));
    }

    private string $last = '';

    private function lastName(): string
    {
        return $this->last;
    }

    public function testSlowRedisKeepsCallsWithinTheirDeadline(): void
    {
        $key = $this->up->key('slow');
        $this->up->script($key, [['status' => 200]]);
        $options = ['backend' => $this->url(), 'on_backend_error' => 'open', 'deadline' => 0.3, 'timeout' => 0.25, 'max_attempts' => 1,
            'budget' => false, 'funnel' => ['limit' => 4]];
        $answers = $this->runHosts($options, $key, 2, 2.0, function (): void {
            usleep(300_000);
            $this->assertSame('OK', self::cli('DEBUG', 'SLEEP', '1'));
        });
        $worstOver = max(array_column($answers, 'worst_over_ms'));
        $fallbacks = array_sum(array_column($answers, 'backend_fallbacks'));
        $this->assertGreaterThan(0, $fallbacks, 'Redis was too slow for some decisions');
        $this->assertLessThan(50.0, $worstOver, 'calls stay within their deadline (a stalled Redis takes at most half of what is left)');
        fwrite(STDERR, sprintf("\n[redis] DEBUG SLEEP 1 during the run: %d fallback decisions, worst %.1f ms past the 300 ms deadline\n", $fallbacks, $worstOver));
    }

    /** @return array<string, array{string}> */
    public function behavioursThatLetCallsThrough(): array
    {
        return ['local' => ['local'], 'open' => ['open']];
    }

    /**
     * A stalled Redis asked with a short deadline: each decision before the attempt (the
     * budget's original on Redis, the funnel's admission) may take half of what is left once
     * the attempt has its least useful time, not half of all of it. Taking half of 100 ms left
     * the attempt just under the 50 ms it needs: with 'open' or 'local' every call that asked
     * the stalled Redis failed with DeadlineExceeded, 0 attempts, instead of going out.
     *
     * @dataProvider behavioursThatLetCallsThrough
     */
    public function testASlowRedisLeavesTheAttemptItsTime(string $behaviour): void
    {
        $key = $this->up->key('short-' . $behaviour);
        $this->up->script($key, [['status' => 200]]);
        $options = ['backend' => $this->url(), 'on_backend_error' => $behaviour, 'deadline' => 0.1, 'max_attempts' => 1,
            'budget' => ['ratio' => 0.1], 'funnel' => ['limit' => 4]];
        $answers = $this->runHosts($options, $key, 2, 2.0, function (): void {
            usleep(300_000);
            $this->assertSame('OK', self::cli('DEBUG', 'SLEEP', '1'));
        }, 1, 20_000);
        $classes = [];
        foreach ($answers as $a) {
            foreach ($a['classes'] as $class => $n) {
                $classes[$class] = ($classes[$class] ?? 0) + $n;
            }
        }
        $fallbacks = array_sum(array_column($answers, 'backend_fallbacks'));
        $worstOver = max(array_column($answers, 'worst_over_ms'));
        $calls = array_sum(array_column($answers, 'calls'));
        $sent = count($this->up->attempts($key, $calls, 2000));
        $why = json_encode(['classes' => $classes, 'messages' => array_merge(...array_column($answers, 'messages'))]);
        $this->assertGreaterThan(0, $fallbacks, 'calls asked the stalled Redis');
        // The calls went out: the upstream saw an attempt for (almost) each. Half of them asked
        // the stalled Redis; when it took the attempt's time, every one of those failed with
        // 0 attempts. A few may still: a process the loaded machine stopped for the last
        // 12 ms of slack finds less than a useful attempt left, and rightly sends nothing.
        $this->assertGreaterThanOrEqual(0.95 * $calls, $sent, "on_backend_error=$behaviour: $sent of $calls calls went out: $why");
        $this->assertLessThanOrEqual($calls, $sent);
        $this->assertSame([], array_diff(array_keys($classes), ['Resilient\\Response', 'Resilient\\DeadlineExceeded']), $why);
        $this->assertLessThan(50.0, $worstOver, 'within the deadline (give or take the client returning)');
        fwrite(STDERR, sprintf("\n[redis] DEBUG SLEEP 1, deadline 100 ms, on_backend_error=%s: %d calls answered, %d fallback decisions, worst %.1f ms past the deadline\n", $behaviour, $classes['Resilient\\Response'] ?? 0, $fallbacks, $worstOver));
    }

    public function testASlotHeldByARequestThatDiesOfAFatalErrorIsGivenBackAtRequestEnd(): void
    {
        $key = $this->up->key('fatal');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 3000]]);
        $name = Run::name('fatal');
        $started = microtime(true);
        $r = PhpProcess::script(__DIR__ . '/fixtures/fatal_mid_call.php', [$name, $this->up->base($key), $this->url()], ['memory_limit' => '64M'])->wait(20.0);
        $this->assertStringContainsString('fatal now', $r->stdout, $r->describe());
        $this->assertStringNotContainsString('not reached', $r->stdout);
        $this->assertStringContainsString('Allowed memory size', $r->stdout . $r->stderr, $r->describe());
        $this->assertCount(1, $this->up->attempts($key, 1, 5000, false), 'the call was in flight');
        $this->assertSame('0', self::cli('ZCARD', Run::id() . ':{' . $name . '}:funnel'), 'released at request end, not by its 60 s lease');
        $this->assertLessThan(10, microtime(true) - $started);
    }

    /**
     * A one-shot CLI process whose call timed out during a stall (its admission written, so
     * Redis runs it once the stall ends and holds the token a whole lease) gives the slot back
     * as it ends: its request end came during the back-off the timeout started and sent
     * nothing, and before, neither did its end, so a funnel of 1 stayed full for 60 s.
     */
    public function testAProcessEndingDuringABackOffGivesBackWhatAStallLeft(): void
    {
        $key = $this->up->key('exit');
        $this->up->script($key, [['status' => 200]]);
        $name = Run::name('exit');
        $options = ['backend' => $this->url() . '&timeout=0.05', 'on_backend_error' => 'open', 'max_attempts' => 1,
            'budget' => false, 'funnel' => ['limit' => 1, 'lease' => 60.0], 'base_url' => $this->up->base($key)];
        $code = sprintf('$c = new Resilient\Client(%1$s, %2$s);
            $c->get("/warm");   // connected, the script loaded, the slot given back
            exec(%3$s);         // Redis stalled 300 ms
            do {                // until a PING goes unanswered for 20 ms
                $probe = stream_socket_client("tcp://127.0.0.1:%4$d");
                stream_set_timeout($probe, 0, 20_000);
                fwrite($probe, "PING\r\n");
                $answered = fgets($probe) !== false;
            } while ($answered);
            echo $c->get("/during")->status(), " ", Resilient\Metrics::snapshot()[%1$s]["backend_fallbacks"], "\n";',
            var_export($name, true), var_export($options, true),
            var_export('redis-cli -p ' . self::$port . ' DEBUG SLEEP 0.3 > /dev/null 2>&1 &', true), self::$port);
        $r = PhpProcess::runCode($code, [], 20.0);
        $this->assertSame("200 1\n", $r->stdout, 'the call fell back (open) during the stall: ' . $r->describe());
        $zset = Run::id() . ':{' . $name . '}:funnel';
        $until = microtime(true) + 5.0;
        while (($held = self::cli('ZCARD', $zset)) !== '0' && microtime(true) < $until) {
            usleep(20_000);
        }
        $this->assertSame('0', $held, 'the slot the late admission took is given back, not held for its 60 s lease');
    }

    public function testTheIniSettingPicksRedisForClientsWithoutTheOption(): void
    {
        $key = $this->up->key('ini');
        $this->up->script($key, [['status' => 200]]);
        $name = Run::name('ini');
        $code = sprintf('$c = new Resilient\\Client(%s, ["base_url" => %s, "max_attempts" => 1]); echo $c->get("/x")->status();
            $s = new Resilient\\Client(%s, ["base_url" => %s, "max_attempts" => 1, "backend" => "shm"]); echo " ", $s->get("/x")->status();',
            var_export($name, true), var_export($this->up->base($key), true), var_export($name . '-shm', true), var_export($this->up->base($key), true));
        // Quoted, as in php.ini: the URL's '=' would end an unquoted ini value.
        $r = PhpProcess::runCode($code, ['resilient.backend' => '"' . $this->url() . '"']);
        $this->assertSame('200 200', trim($r->stdout), $r->describe());
        // The default budget (60 s window) of the first client lives in Redis; the second's not.
        $this->assertSame('1', self::cli('EXISTS', Run::id() . ':{' . $name . '}:budget:60000ms:sums'));
        $this->assertSame('0', self::cli('EXISTS', Run::id() . ':{' . $name . '-shm}:budget:60000ms:sums'));
    }

    public function testASlotIsGivenBackWhenTheAttemptRanToTheDeadline(): void
    {
        $key = $this->up->key('to-deadline');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 2000]]);
        $name = Run::name('to-deadline');
        $client = new Client($name, ['base_url' => $this->up->base($key), 'backend' => $this->url(), 'on_backend_error' => 'closed',
            'deadline' => 0.3, 'timeout' => 1.0, 'max_attempts' => 1, 'budget' => false, 'funnel' => ['limit' => 1, 'lease' => 60.0]]);
        for ($i = 0; $i < 3; $i++) {
            $t = hrtime(true);
            try {
                $client->get('/x');
                $this->fail('the upstream answers after the deadline');
            } catch (\Resilient\Unavailable $e) {
                $this->assertNotInstanceOf(\Resilient\FunnelFull::class, $e, 'the slot of the call before was given back');
            }
            $this->assertLessThan(500, (hrtime(true) - $t) / 1e6, "ended at the 300 ms deadline, not the 2 s answer");
            $this->assertSame('0', self::cli('ZCARD', Run::id() . ':{' . $name . '}:funnel'), 'no slot held until its 60 s lease');
        }
    }

    /**
     * A funnel wait that runs into the deadline asks Redis last with almost no time left for
     * the guards: a healthy Redis must still decide. Treating that as Redis unreachable let a
     * call through the full funnel under 'open' (and counted a fallback), or refused it as
     * CircuitOpen under 'closed' with the breaker closed.
     */
    public function testAHealthyRedisDecidesToTheEndOfAFunnelWait(): void
    {
        $key = $this->up->key('wait-end');
        $this->up->script($key, [['status' => 200]]);
        $outcomes = [];
        foreach (['open' => [], 'closed' => ['circuit' => ['failure_ratio' => 0.5, 'min_calls' => 5]]] as $behaviour => $extra) {
            $name = Run::name("wait-end-$behaviour");
            // The one slot, held by a holder that never gives it back (a far-off lease).
            self::cli('ZADD', Run::id() . ':{' . $name . '}:funnel', '99999999999999', 'held-elsewhere');
            $client = new Client($name, ['base_url' => $this->up->base($key), 'backend' => $this->url(), 'on_backend_error' => $behaviour,
                'deadline' => 0.1, 'timeout' => 0.1, 'max_attempts' => 1, 'budget' => false, 'funnel' => ['limit' => 1, 'wait' => 5.0]] + $extra);
            for ($i = 0; $i < 30; $i++) {
                try {
                    $client->get('/x');
                    $outcomes[$behaviour]['sent'] = ($outcomes[$behaviour]['sent'] ?? 0) + 1;
                } catch (\Resilient\Unavailable $e) {
                    $short = substr(strrchr(get_class($e), '\\'), 1);
                    $outcomes[$behaviour][$short] = ($outcomes[$behaviour][$short] ?? 0) + 1;
                }
            }
            $outcomes[$behaviour]['backend_fallbacks'] = \Resilient\Metrics::snapshot()[$name]['backend_fallbacks'];
            ksort($outcomes[$behaviour]);
        }
        foreach ($outcomes as $behaviour => $seen) {
            $this->assertSame(0, $seen['backend_fallbacks'], "$behaviour: Redis answered every time: " . json_encode($outcomes));
            $this->assertSame([], array_diff(array_keys($seen), ['DeadlineExceeded', 'FunnelFull', 'backend_fallbacks']),
                "$behaviour: every call refused for want of a slot or of time: " . json_encode($outcomes));
        }
        $this->assertSame([], $this->up->attempts($key, 0, 200), 'nothing was sent past the held slot');
    }

    /**
     * A Redis that accepts connections and never answers (stalled) takes at most half of what
     * the call has left, whatever the URL asks of the handshake: with a password and a database
     * other than 0 the connect waited for AUTH's reply and then SELECT's, twice its share, and
     * the call under 'open' ended DeadlineExceeded with no attempt sent. (A deadline of 1 s: the
     * half left for the attempt is far more than a loaded machine's pauses.)
     */
    public function testAStalledRedisTakesHalfTheCallWithAPasswordAndADatabaseToo(): void
    {
        $key = $this->up->key('stalled');
        $this->up->script($key, [['status' => 200]]);
        // Listening, never accepting: the kernel completes the connect, nobody answers.
        $stalled = stream_socket_server('tcp://127.0.0.1:0', $errno, $error);
        $port = (int) substr(strrchr(stream_socket_get_name($stalled, false), ':'), 1);
        foreach (['/0', '/1', '/2?protocol=resp3'] as $db) {
            $name = Run::name('stalled');
            // Redis's own `timeout` above the deadline: the wait is half of what is left.
            $url = "redis://user:pw@127.0.0.1:$port$db" . (str_contains($db, '?') ? '&' : '?') . 'timeout=5';
            $client = new Client($name, ['base_url' => $this->up->base($key), 'backend' => $url,
                'on_backend_error' => 'open', 'deadline' => 1.0, 'timeout' => 1.0, 'max_attempts' => 1, 'budget' => false,
                'funnel' => ['limit' => 2]]);
            $t = hrtime(true);
            try {
                $status = $client->get('/x')->status();
            } catch (\Resilient\Unavailable $e) {
                $status = $e->getMessage();
            }
            $this->assertSame(200, $status, "$db: Redis took its half (500 ms), the attempt went out under 'open'");
            $this->assertLessThan(950, (hrtime(true) - $t) / 1e6, $db);
        }
        fclose($stalled);
    }

    /**
     * A pool whose first admission waits for a stalled Redis (half of what is left, 1 s
     * here) still ends at its deadline: each call's deadline is counted from the pool's start
     * when it first runs. Before, the calls queued behind that wait counted theirs from when
     * they started, so their attempts (3 s answers) ran that 1 s past the pool's deadline of
     * 2 s; the bound below lies halfway.
     */
    public function testAPoolWhoseAdmissionsWaitForAStalledRedisEndsAtItsDeadline(): void
    {
        $key = $this->up->key('pool-stall');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 3000]], 'repeat_last');
        $client = new Client(Run::name('pool-stall'), ['base_url' => $this->up->base($key),
            'backend' => $this->url() . '&timeout=1', 'on_backend_error' => 'open', 'deadline' => 2.0, 'timeout' => 5,
            'max_attempts' => 1, 'funnel' => ['limit' => 8], 'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 20]]);
        $this->up->script($key, [['status' => 200]], 'repeat_last', '/warm');
        $this->assertSame(200, $client->get('/warm')->status());
        $requests = [];
        for ($i = 0; $i < 12; $i++) {
            $requests["r$i"] = ['GET', "/p$i"];
        }
        self::cli('CLIENT', 'PAUSE', '4000', 'ALL');
        try {
            $t = hrtime(true);
            $client->pool($requests, 6);
            $elapsed = (hrtime(true) - $t) / 1e6;
        } finally {
            self::cli('CLIENT', 'UNPAUSE');
        }
        $this->assertGreaterThan(1900, $elapsed, 'the attempts ran until the deadline');
        $this->assertLessThan(2500, $elapsed, 'the pool ends at its deadline (2 s), not 1 s after it');
    }

    /**
     * A PHP signal handler (a queue worker's, with async signals) and signals arriving while a
     * decision waits for Redis's reply: the read was interrupted (EINTR: a socket with a
     * timeout is never restarted), taken for Redis failing, and every decision of the back-off
     * that followed went to on_backend_error with Redis up.
     */
    public function testSignalsHandledByPhpDoNotInterruptRedis(): void
    {
        $key = $this->up->key('signals');
        $this->up->script($key, [['status' => 200]]);
        $code = sprintf('
            pcntl_async_signals(true);
            $got = 0;
            pcntl_signal(SIGUSR1, function () use (&$got) { $got++; });
            $funnel = ["limit" => 50];
            $c = new Resilient\Client(%s, ["base_url" => %s, "backend" => %s, "on_backend_error" => "closed", "funnel" => $funnel, "max_attempts" => 1]);
            $c->get("/x");
            $parent = getmypid();
            $kid = pcntl_fork();
            if ($kid === 0) {
                pcntl_signal(SIGUSR1, SIG_IGN);
                while (true) { posix_kill($parent, SIGUSR1); usleep(200); }
            }
            $calls = 0;
            $refused = 0;
            for ($end = microtime(true) + 1.5; microtime(true) < $end; $calls++) {
                try { $c->get("/x"); } catch (Resilient\Unavailable $e) { $refused++; }
            }
            posix_kill($kid, SIGKILL);
            pcntl_waitpid($kid, $status);
            echo json_encode(["calls" => $calls, "refused" => $refused, "signals" => $got,
                "fallbacks" => Resilient\Metrics::snapshot()[%1$s]["backend_fallbacks"]]);',
            var_export(Run::name('signals'), true), var_export($this->up->base($key), true), var_export($this->url(), true));
        $r = PhpProcess::runCode($code, [], 30);
        $out = json_decode($r->stdout, true) ?? $this->fail($r->describe());
        $this->assertGreaterThan(100, $out['signals'], 'signals arrived during the calls: ' . $r->stdout);
        $this->assertGreaterThan(100, $out['calls'], $r->stdout);
        $this->assertSame(0, $out['fallbacks'], 'Redis answered every decision: ' . $r->stdout);
        $this->assertSame(0, $out['refused'], $r->stdout);
    }

    /** The URL's database is the one used (selected apart from the handshake). */
    public function testTheUrlsDatabaseHoldsTheKeys(): void
    {
        $key = $this->up->key('db');
        $this->up->script($key, [['status' => 200]]);
        $name = Run::name('db');
        $client = new Client($name, ['base_url' => $this->up->base($key), 'backend' => 'redis://127.0.0.1:' . self::$port . '/3?prefix=' . Run::id() . ':',
            'on_backend_error' => 'closed', 'max_attempts' => 1]);
        $this->assertSame(200, $client->get('/x')->status());
        $this->assertSame(0, \Resilient\Metrics::snapshot()[$name]['backend_fallbacks']);
        $budget = Run::id() . ':{' . $name . '}:budget:60000ms:sums';
        $this->assertSame('1', self::cli('-n', '3', 'EXISTS', $budget));
        $this->assertSame('0', self::cli('-n', '0', 'EXISTS', $budget));
    }

    public function testTheBreakerOnRedisCountsAttemptsThatRanToTheDeadlineAndOpensForEveryHost(): void
    {
        $key = $this->up->key('breaker');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 2000]]);
        $name = Run::name('breaker');
        $options = ['base_url' => $this->up->base($key), 'backend' => $this->url(), 'on_backend_error' => 'closed',
            'deadline' => 0.2, 'timeout' => 1.0, 'max_attempts' => 1, 'budget' => false,
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 3, 'window' => 10.0, 'open_for' => 30.0]];
        $client = new Client($name, $options);
        for ($i = 0; $i < 3; $i++) {
            try {
                $client->get('/x');
                $this->fail('the upstream answers after the deadline');
            } catch (\Resilient\Unavailable $e) {
                $this->assertNotInstanceOf(\Resilient\CircuitOpen::class, $e, "call $i");
            }
        }
        // Another "host" (its own segment) sees the breaker open: nothing is sent.
        $code = sprintf('try { (new Resilient\\Client(%s, %s))->get("/x"); echo "sent"; } catch (Resilient\\Unavailable $e) { echo get_class($e); }',
            var_export($name, true), var_export($options, true));
        $r = PhpProcess::runCode($code, ['resilient.shm_path' => Run::shmPath('breaker-other-' . bin2hex(random_bytes(3)))]);
        $this->assertSame('Resilient\\CircuitOpen', trim($r->stdout), $r->describe());
        $this->assertCount(3, $this->up->attempts($key, 3, 5000, false), 'the open breaker sent nothing more');
    }

    /**
     * Redis out of reach under 'closed': the call is refused as the guard's own refusal is
     * (CircuitOpen for a breaker, FunnelFull for a funnel: what callers catch), but its message
     * says why, and the breaker's state gauge is not set to open. Before, the message said
     * "circuit open" and the gauge read open for a breaker that never opened, pointing the
     * on-call engineer at a healthy upstream. The message names what Redis did (never the
     * URL, which may hold a password), and a call refused during the back-off that follows
     * says so, with when Redis is asked again.
     */
    public function testRedisOutOfReachUnderClosedIsToldAsSuchNotAsTheGuardsState(): void
    {
        $key = $this->up->key('closed-down');
        $this->up->script($key, [['status' => 200]]);
        $port = Run::freePort();
        $down = "redis://:s3cret@127.0.0.1:$port/0?timeout=0.05";
        $why = "/attempt 1 refused, not sent \\(Redis: connection refused(; asked again in \\d+ ms)?\\) \\(0 attempts/";
        $messages = [];
        foreach ([
            'circuit' => [\Resilient\CircuitOpen::class, ['circuit' => ['min_calls' => 5]]],
            'funnel' => [\Resilient\FunnelFull::class, ['funnel' => ['limit' => 2]]],
        ] as $guard => [$class, $extra]) {
            $name = Run::name("closed-down-$guard");
            $client = new Client($name, ['base_url' => $this->up->base($key), 'backend' => $down, 'on_backend_error' => 'closed',
                'max_attempts' => 1, 'budget' => false] + $extra);
            try {
                $client->get('/x');
                $this->fail("$guard: refused while Redis is out of reach");
            } catch (\Resilient\Unavailable $e) {
                $this->assertInstanceOf($class, $e, $e->getMessage());
                $this->assertStringContainsString("the backend did not answer or refused (on_backend_error 'closed'): attempt 1 refused, not sent", $e->getMessage());
                $this->assertStringNotContainsString('circuit open', $e->getMessage());
                $this->assertStringNotContainsString('funnel full', $e->getMessage());
                $this->assertMatchesRegularExpression($why, $e->getMessage());
                $this->assertStringNotContainsString('s3cret', $e->getMessage());
                $this->assertStringNotContainsString(":$port", $e->getMessage());
                $messages[] = $e->getMessage();
            }
            // At once again: within the back-off the failure started (50 ms, then 100 ms),
            // Redis is not asked.
            try {
                $client->get('/x');
                $this->fail("$guard: refused again");
            } catch (\Resilient\Unavailable $e) {
                $this->assertInstanceOf($class, $e, $e->getMessage());
                $this->assertMatchesRegularExpression($why, $e->getMessage());
                $messages[] = $e->getMessage();
            }
            $m = \Resilient\Metrics::snapshot()[$name];
            $this->assertSame(2, $m['backend_fallbacks'], $guard);
            $this->assertSame('closed', $m['breaker']['state'], "$guard: the breaker's state is not what Redis being down says");
        }
        $this->assertSame([], $this->up->attempts($key, 0, 100), 'nothing sent');
        $this->assertNotEmpty(preg_grep('/; asked again in \d+ ms\) /', $messages), implode("\n", $messages));
    }

    public function testAForkedChildOpensItsOwnConnection(): void
    {
        $key = $this->up->key('fork');
        $this->up->script($key, [['status' => 200]]);
        $connections = fn (): int => (int) preg_replace('/.*total_connections_received:(\d+).*/s', '$1', self::cli('INFO', 'stats'));
        $before = $connections();
        $code = sprintf('$c = new Resilient\\Client(%s, ["base_url" => %s, "backend" => %s, "on_backend_error" => "closed", "funnel" => ["limit" => 2], "max_attempts" => 1]);
            echo $c->get("/x")->status();
            $pid = pcntl_fork();
            if ($pid === 0) { echo " child ", $c->get("/x")->status(), $c->get("/x")->status(); exit(0); }
            pcntl_waitpid($pid, $st);
            echo " parent ", $c->get("/x")->status();',
            var_export(Run::name('fork'), true), var_export($this->up->base($key), true), var_export($this->url(), true));
        $r = PhpProcess::runCode($code);
        $this->assertSame('200 child 200200 parent 200', trim($r->stdout), $r->describe());
        // redis-cli's own INFO connection counts one; the parent and the child one each.
        $this->assertSame(3, $connections() - $before, 'one connection per process, the child\'s opened after fork');
    }

    public function testABadRedisUrlOrBehaviourIsAClearErrorWithoutThePassword(): void
    {
        foreach (['redis://:s3cret@[::1', 'redis://:s3cret@127.0.0.1:6379/x', 'mysql://:s3cret@h', 'redis://:s3cret@127.0.0.1:6379/0?prefx=a:', 'redis://:s3cret@127.0.0.1:6379/-1'] as $url) {
            try {
                new Client('bad', ['backend' => $url, 'funnel' => ['limit' => 2]]);
                $this->fail('accepted a bad URL');
            } catch (\ValueError $e) {
                $this->assertStringStartsWith("option 'backend'", $e->getMessage());
                $this->assertStringNotContainsString('s3cret', $e->getMessage());
            }
        }
        try {
            new Client('bad', ['backend' => $this->url(), 'on_backend_error' => 'retry']);
            $this->fail('accepted a bad on_backend_error');
        } catch (\ValueError $e) {
            $this->assertStringContainsString("option 'on_backend_error': must be 'local', 'open' or 'closed'", $e->getMessage());
        }
        // From the ini: a \ValueError named after the setting, not after a client option.
        foreach ([
            'redis://:s3cret@[::1' => 'ValueError: resilient.backend: is not a valid Redis URL (invalid IPv6 address)',
            'redis://:s3cret@127.0.0.1:99999/0' => 'ValueError: resilient.backend: is not a valid Redis URL (invalid port number)',
            'mysql://:s3cret@127.0.0.1:3306' => "ValueError: resilient.backend: must be 'shm' or a redis://",
            // A '?' left in the password: said as such, from the option and from the ini alike.
            'redis://default:s3cr?et@10.0.0.5:6379/0' => "ValueError: resilient.backend: has a '?' or '#' in its user or password",
            'redis://:s3cret@127.0.0.1:6379/-1' => 'ValueError: resilient.backend: names database -1; a database index is 0 or more',
        ] as $url => $expected) {
            $r = PhpProcess::runCode('try { new Resilient\Client("x", ["funnel" => ["limit" => 2]]); } catch (Throwable $e) { echo get_class($e), ": ", $e->getMessage(); }', ['resilient.backend' => $url]);
            $this->assertStringStartsWith($expected, $r->stdout, $r->describe());
            $this->assertStringNotContainsString('s3cret', $r->stdout . $r->stderr);
        }
    }

    /**
     * A password with a '?' and then a '#' (`default:8734?QwE#rT`): the URL parser ends the
     * password at the '?', the query at the '#', and the host lands in the fragment. No part
     * of the password shows, whether given as the option, in the ini, or by phpinfo().
     */
    public function testAPasswordWithAQuestionMarkThenAHashIsNeverShown(): void
    {
        foreach (['redis://default:8734?QwE#rT@10.0.0.5:6379/0', 'redis://admin:6380?prefix=Wv#Xk@127.0.0.1:6379/0'] as $url) {
            $parts = preg_split('/[?#:=]/', substr($url, 8, strrpos($url, '@') - 8));
            $code = sprintf('try { new Resilient\Client("x", ["backend" => %s, "funnel" => ["limit" => 2]]); } catch (Throwable $e) { echo get_class($e), ": ", $e->getMessage(), "\n"; }
                try { new Resilient\Client("x", ["funnel" => ["limit" => 2]]); } catch (Throwable $e) { echo get_class($e), ": ", $e->getMessage(), "\n"; }', var_export($url, true));
            $r = PhpProcess::runCode($code, ['resilient.backend' => '"' . $url . '"']);
            $lines = explode("\n", trim($r->stdout));
            $this->assertCount(2, $lines, $r->describe());
            $this->assertStringStartsWith("ValueError: option 'backend': has a '#' in its user or password", $lines[0]);
            $this->assertStringStartsWith("ValueError: resilient.backend: has a '#' in its user or password", $lines[1]);
            $info = PhpProcess::args(['-i'], ['resilient.backend' => '"' . $url . '"'])->wait(20);
            $this->assertStringContainsString('resilient.backend => (not shown: it may hold a password)', $info->stdout);
            // What php -i shows of PHP's settings and modules: the environment and the request's
            // variables after them hold digits of their own (REQUEST_TIME 1796380874 holds
            // '6380'; a run id, a pid).
            $shown = strstr($info->stdout, "\nEnvironment\n", true);
            $this->assertIsString($shown, $info->describe());
            $shown .= $info->stderr;
            foreach (array_filter($parts, fn (string $p) => strlen($p) > 1 && !in_array($p, ['default', 'admin', 'prefix'], true)) as $part) {
                $this->assertStringNotContainsString($part, $r->stdout . $r->stderr, "$url: '$part' shown");
                $this->assertStringNotContainsString($part, $shown, "$url: '$part' shown by phpinfo");
            }
        }
    }

    /**
     * A refused configured backend throws in every client that reads it, until `ini_set()` gives
     * another, good value for the request (a bad one is refused and changes nothing);
     * `ini_restore()` brings the refusal back.
     */
    public function testAGoodIniSetOverridesARefusedConfiguredBackendUntilRestored(): void
    {
        $code = 'function make() { try { new Resilient\Client("x", ["funnel" => ["limit" => 2]]); return "ok"; } catch (ValueError $e) { return "refused"; } }
            echo make();
            echo " ", var_export(ini_set("resilient.backend", "mysql://y"), true), " ", make();
            echo " ", var_export(ini_set("resilient.backend", " shm ") !== false, true), " ", make();
            ini_restore("resilient.backend");
            echo " ", make();';
        $r = PhpProcess::runCode($code, ['resilient.backend' => 'mysql://:s3cret@h']);
        $this->assertSame('refused false refused true ok refused', trim($r->stdout), $r->describe());
    }

    /**
     * `ini_set()` refuses a backend URL any client would refuse (an unknown query parameter,
     * port 0, a braced prefix, `ca` on a redis:// URL), not only one of the wrong shape: it
     * returns false and the setting keeps its value. php.ini's such value throws at the first
     * client, in the words of the check, never quoting the URL. A `ca` file is read by each
     * client, not by the ini check: one missing when PHP starts (a secret mounted later) is
     * used once it is there, not refused for the process's life.
     */
    public function testIniSetRefusesABackendEveryClientWouldRefuse(): void
    {
        $code = 'foreach (["redis://h:1/0?prefx=1", "redis://h:0/0", "redis://h:1/0?prefix=a{", "redis://h:1/0?ca=/x.pem", "redis://:s3cret@h:1/0?s3cret"] as $url) {
                echo var_export(ini_set("resilient.backend", $url), true), " ", ini_get("resilient.backend"), "\n";
            }
            echo var_export(ini_set("resilient.backend", "redis://h:1/0?prefix=ok&timeout=0.5") !== false, true), "\n";';
        $r = PhpProcess::runCode($code);
        $this->assertSame(str_repeat("false shm\n", 5) . 'true', trim($r->stdout), $r->describe());

        $ca = Run::tempDir('late-ca') . '/ca.pem';
        $r = PhpProcess::runCode(sprintf(
            'function make() { try { new Resilient\Client("x", ["funnel" => ["limit" => 2]]); return "ok"; } catch (ValueError $e) { return $e->getMessage(); } }
            echo make(), "\n";
            file_put_contents(%s, file_get_contents(%s));
            echo make(), "\n";',
            var_export($ca, true),
            var_export(\Resilient\Tests\Harness\TestCa::shared()->path("ca.pem"), true),
        ), ['resilient.backend' => "\"rediss://127.0.0.1:1/0?ca=$ca\""]);
        $lines = explode("\n", trim($r->stdout));
        $this->assertStringStartsWith("resilient.backend: query parameter 'ca': ", $lines[0], $r->describe());
        $this->assertSame('ok', $lines[1] ?? null, $r->describe());
        $r = PhpProcess::runCode(
            'try { new Resilient\Client("x"); } catch (ValueError $e) { echo $e->getMessage(); }',
            ['resilient.backend' => 'redis://:s3cret@h:1/0?prefx=s3cret'],
        );
        $this->assertSame(
            "resilient.backend: query parameter 'prefx' is not known (known: prefix, timeout, ca, protocol) (the value from php.ini, -d, the FPM pool, .user.ini or a FastCGI PHP_VALUE is not shown: it may hold a password)",
            $r->stdout,
            $r->describe(),
        );
    }

    /** phpinfo() and `php -i` show the backend with its password masked. */
    public function testPhpinfoMasksThePassword(): void
    {
        $r = PhpProcess::args(['-i'], ['resilient.backend' => 'redis://user:s3cret@127.0.0.1:6379/2'])->wait(20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString('resilient.backend => redis://user:***@127.0.0.1:6379/2 => redis://user:***@127.0.0.1:6379/2', $r->stdout);
        $this->assertStringNotContainsString('s3cret', $r->stdout);
        // A password typed where the query goes (refused when a client is made, so the ini
        // takes it): the masked user:password left it in plain sight.
        // (A value holding `;pass=` cannot come through -d unquoted: src/ini.rs's unit test.)
        $r = PhpProcess::args(['-i'], ['resilient.backend' => 'redis://:s3cret@127.0.0.1:6379/0?s3cret'])->wait(20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString('resilient.backend => (not shown: it may hold a password)', $r->stdout);
        $this->assertStringNotContainsString('s3cret', $r->stdout);
    }
}
