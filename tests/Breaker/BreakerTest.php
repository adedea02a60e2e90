<?php

declare(strict_types=1);

namespace Resilient\Tests\Breaker;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Client;
use Resilient\CircuitOpen;
use Resilient\Deadline;
use Resilient\DeadlineExceeded;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Http\HttpTestCase;
use Resilient\UpstreamFailed;

/**
 * The circuit breaker, with real processes against the mock upstream, counting at the upstream:
 * it opens after the threshold; while open nothing reaches the upstream (from any process); at
 * the half-open moment exactly one probe of 16 hammering CLI processes reaches it; a probe
 * holder killed with SIGKILL is given up after its bound and a new probe goes through.
 */
final class BreakerTest extends HttpTestCase
{
    private const MIN_CALLS = 5;

    /** @return array<string,mixed> */
    private function options(string $key, float $openFor, float $timeout = 2.0): array
    {
        return [
            'base_url' => $this->up->base($key),
            'timeout' => $timeout,
            'max_attempts' => 1,
            'budget' => false,
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => self::MIN_CALLS, 'window' => 10.0, 'open_for' => $openFor],
        ];
    }

    /** Fails MIN_CALLS calls with the upstream's 503s: the breaker opens at the last. */
    private function open(Client $client): void
    {
        for ($i = 0; $i < self::MIN_CALLS; $i++) {
            try {
                $client->get('/x');
                $this->fail('the upstream answers 503');
            } catch (UpstreamFailed $e) {
                $this->assertSame(503, $e->getCode());
            }
        }
    }

    public function testItOpensAfterTheThresholdAndNothingReachesTheUpstreamWhileOpen(): void
    {
        $key = $this->up->key('open');
        $this->up->script($key, [['status' => 503]]);
        $name = Run::name('breaker');
        $client = new Client($name, $this->options($key, 30.0));
        $this->open($client);
        $this->assertCount(self::MIN_CALLS, $this->up->attempts($key, self::MIN_CALLS));

        $t = hrtime(true);
        for ($i = 0; $i < 50; $i++) {
            try {
                $client->get('/x');
                $this->fail('the circuit is open');
            } catch (CircuitOpen $e) {
                $this->assertInstanceOf(\Resilient\Unavailable::class, $e);
                $this->assertStringContainsString('circuit open', $e->getMessage());
                $this->assertNull($e->response(), 'nothing was sent');
            }
        }
        $perCallUs = (hrtime(true) - $t) / 1e3 / 50;
        // Another process of the host sees the same open breaker.
        $spec = base64_encode(json_encode(['name' => $name, 'options' => $this->options($key, 30.0), 'path' => '/x']));
        $other = PhpProcess::script(__DIR__ . '/fixtures/probe.php', [$spec])->wait(20.0);
        $this->assertStringContainsString('Resilient\\\\CircuitOpen', $other->stdout, $other->describe());

        $this->assertCount(self::MIN_CALLS, $this->up->attempts($key, self::MIN_CALLS), 'no attempt reached the upstream while open');
        fwrite(STDERR, sprintf("\n[breaker] opened after %d failures; 51 calls while open (2 processes): 0 reached the upstream, %.1f µs per refused call\n", self::MIN_CALLS, $perCallUs));
    }

    public function testASuddenOutageAfterAHealthySpellOpensItAfterTheStreak(): void
    {
        $key = $this->up->key('streak');
        $this->up->script($key, array_merge(array_fill(0, 100, ['status' => 200]), [['status' => 503]]));
        $client = new Client(Run::name('breaker'), $this->options($key, 30.0));
        for ($i = 0; $i < 100; $i++) {
            $this->assertSame(200, $client->get('/x')->status());
        }
        // 100 successes in the window: a ratio of 0.5 alone would take 100 failures.
        $this->open($client);
        $refused = 0;
        for ($i = 0; $i < 20; $i++) {
            try {
                $client->get('/x');
            } catch (CircuitOpen) {
                $refused++;
            }
        }
        $this->assertSame(20, $refused, 'open after consecutive_failures (min_calls) failures in a row');
        $this->assertCount(100 + self::MIN_CALLS, $this->up->attempts($key, 100 + self::MIN_CALLS));
    }

    /**
     * The retry the breaker refuses (the first answer opened it) is never sent, so it costs
     * the retry budget nothing (docs/errors.md): the budget allowed it before its backoff, and
     * it is given back. Before, it stayed spent: every call in flight when an outage began
     * used up a retry, and real retries were denied for the rest of the window.
     */
    public function testARetryTheBreakerRefusesCostsTheBudgetNothing(): void
    {
        $key = $this->up->key('give-back');
        $this->up->script($key, [['status' => 503]]);
        $name = Run::name('breaker-budget');
        $client = new Client($name, [
            'base_url' => $this->up->base($key),
            'max_attempts' => 3,
            'budget' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0],
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 1, 'window' => 10.0, 'open_for' => 30.0],
        ]);
        try {
            $client->get('/x');
            $this->fail('the breaker refuses the retry');
        } catch (CircuitOpen $e) {
            $this->assertStringContainsString('not sent', $e->getMessage());
        }
        $this->assertCount(1, $this->up->attempts($key, 1), 'one attempt reached the upstream');
        $stats = (new \Resilient\RetryBudget($name, ratio: 0.1, floor: 5, window: 60.0))->stats();
        $this->assertSame(1, $stats['originals']);
        $this->assertSame(0, $stats['retries'], 'the refused retry was given back');
    }

    public function testClientErrorsNeverOpenIt(): void
    {
        $key = $this->up->key('4xx');
        $this->up->script($key, [['status' => 404]]);
        $client = new Client(Run::name('breaker'), $this->options($key, 30.0));
        for ($i = 0; $i < 4 * self::MIN_CALLS; $i++) {
            $this->assertSame(404, $client->get('/x')->status());
        }
        $this->assertCount(4 * self::MIN_CALLS, $this->up->attempts($key, 4 * self::MIN_CALLS));
    }

    public function testSixteenProcessesAtTheHalfOpenMomentSendExactlyOneProbe(): void
    {
        $key = $this->up->key('halfopen');
        // 503s open the breaker; the probe's 503 takes 300 ms, then the breaker opens again
        // for 0.8-1.2 s: past the processes' stop.
        $this->up->script($key, [...array_fill(0, self::MIN_CALLS, ['status' => 503]), ['status' => 503, 'delay_ms' => 300]]);
        $name = Run::name('breaker');
        $options = $this->options($key, 1.0);
        $go = Run::tempDir('breaker') . '/go-' . bin2hex(random_bytes(3));
        $spec = base64_encode(json_encode(['name' => $name, 'options' => $options, 'path' => '/x', 'go_file' => $go]));
        $procs = [];
        for ($i = 0; $i < 16; $i++) {
            $procs[] = PhpProcess::script(__DIR__ . '/fixtures/hammer.php', [$spec]);
        }
        foreach ($procs as $p) {
            $this->assertTrue($p->waitForOutput(fn (string $out) => str_contains($out, 'ready'), 30.0), 'a process did not start');
        }
        $beforeOpen = microtime(true);
        $this->open(new Client($name, $options));
        $opened = microtime(true);
        // Open until opened + 0.8..1.2 s; the probe fails 0.3 s after it was let through,
        // reopening for at least 0.8 s: no second probe before opened + 1.9 s. The processes
        // stop at 1.7 s, past the latest half-open moment (1.2 s) and short of that.
        $stop = $opened + 1.7;
        file_put_contents($go, json_encode(['stop_at' => $stop]));

        $sent = [];
        $calls = 0;
        $refused = 0;
        foreach ($procs as $p) {
            $r = $p->wait(30.0);
            $this->assertSame(0, $r->exitCode, $r->describe());
            $lines = explode("\n", trim($r->stdout));
            $out = json_decode((string) end($lines), true);
            $this->assertIsArray($out, $r->describe());
            $calls += $out['calls'];
            $refused += $out['classes']['Resilient\\CircuitOpen'] ?? 0;
            array_push($sent, ...$out['sent']);
            // Every process was calling at the half-open moment (at most 1.2 s after opening).
            $this->assertLessThan($opened + 0.8, $out['first_t']);
            $this->assertGreaterThan($opened + 1.5, $out['last_t']);
        }
        $attempts = $this->up->attempts($key, self::MIN_CALLS + 1);
        $this->assertCount(self::MIN_CALLS + 1, $attempts, 'exactly one probe reached the upstream');
        $this->assertCount(1, $sent, 'one call of the 16 processes was sent: ' . json_encode($sent));
        $this->assertSame(503, $sent[0]['status']);
        $this->assertSame($calls - 1, $refused, 'every other call was refused as circuit open');
        $half = $sent[0]['t'] - $opened;
        // The lower bound from two instants no delay can move the wrong way: the breaker opened
        // after $beforeOpen, and the probe reached the upstream after it was let through.
        $probeArrival = $attempts[self::MIN_CALLS]['unix_ms'] / 1000;
        $this->assertGreaterThanOrEqual(0.79, $probeArrival - $beforeOpen, 'not before open_for - 20 %');
        $this->assertLessThanOrEqual(1.3, $half, 'not long after open_for + 20 %');
        fwrite(STDERR, sprintf("\n[breaker] 16 processes, %d calls around the half-open moment (%.2f s after opening): 1 probe reached the upstream, %d refused\n", $calls, $half, $refused));
    }

    public function testAProbeHolderKilledWithSigkillIsGivenUpAfterItsBound(): void
    {
        $key = $this->up->key('killed');
        // 503s open the breaker; the probe hangs; then the upstream is healthy.
        $this->up->script($key, [...array_fill(0, self::MIN_CALLS, ['status' => 503]), ['hang' => true, 'hang_ms' => 20000], ['status' => 200]]);
        $name = Run::name('breaker');
        // timeout 1 s: a probe's ticket is given up 1 s + 250 ms after it was taken.
        $options = $this->options($key, 0.2, 1.0);
        $client = new Client($name, $options);
        $this->open($client);
        usleep(300_000); // past open_for + 20 %

        $spec = base64_encode(json_encode(['name' => $name, 'options' => $options, 'path' => '/x']));
        $holder = PhpProcess::script(__DIR__ . '/fixtures/probe.php', [$spec]);
        $this->assertCount(self::MIN_CALLS + 1, $this->up->attempts($key, self::MIN_CALLS + 1, 10000, false), 'the probe reached the upstream');
        $probeSeen = microtime(true);
        $holder->signal(SIGKILL);
        $r = $holder->wait(10.0);
        $this->assertSame(SIGKILL, $r->signal, $r->describe());

        // Half-open with a dead holder: refused until the bound, then one new probe.
        $this->expectCircuitOpen($client);
        $closedAt = null;
        $refusals = 0;
        while (microtime(true) < $probeSeen + 5.0) {
            try {
                $this->assertSame(200, $client->get('/x')->status());
                $closedAt = microtime(true);
                break;
            } catch (CircuitOpen) {
                $refusals++;
                usleep(20_000);
            }
        }
        $this->assertNotNull($closedAt, 'the breaker stayed half-open');
        $after = $closedAt - $probeSeen;
        $this->assertGreaterThan(1.0, $after, 'not before the bound');
        $this->assertLessThan(1.25 + 0.5, $after, 'soon after the bound (1.25 s)');
        $this->assertSame(200, $client->get('/x')->status(), 'closed by the new probe');
        $this->assertCount(self::MIN_CALLS + 3, $this->up->attempts($key, self::MIN_CALLS + 3));
        fwrite(STDERR, sprintf("\n[breaker] probe holder SIGKILLed: %d refusals, a new probe went through %.2f s after the lost one (bound 1.25 s)\n", $refusals, $after));
    }

    /**
     * A probe won by a caller whose deadline ends before the upstream answers is no verdict:
     * the next caller probes at once and closes the breaker of the healthy upstream. Before,
     * that one page's deadline reopened it for every process of the host.
     */
    public function testAProbeEndedByItsCallersDeadlineLeavesTheNextCallerToProbe(): void
    {
        $key = $this->up->key('deadline-probe');
        $this->up->script($key, [...array_fill(0, self::MIN_CALLS, ['status' => 503]), ['status' => 200, 'delay_ms' => 150]]);
        $client = new Client(Run::name('breaker'), $this->options($key, 0.2));
        $this->open($client);
        usleep(300_000); // past open_for + 20 %

        Deadline::within(0.07, function () use ($client) {
            try {
                $client->get('/x');
                $this->fail('the probe outlives its caller\'s deadline');
            } catch (DeadlineExceeded) {
                $this->addToAssertionCount(1);
            }
        });
        $this->assertSame(200, $client->get('/x')->status(), 'the next caller probed and closed it');
        $this->assertSame(200, $client->get('/x')->status(), 'closed');
        $this->assertCount(self::MIN_CALLS + 3, $this->up->attempts($key, self::MIN_CALLS + 3));
    }

    /**
     * A probe that waited half of what the client's own settings give an attempt (its
     * `timeout`, a request's own, or the client's `deadline` when shorter) or more without an
     * answer reopens the breaker, whatever cut it: the client's `deadline` equal to its
     * `timeout` (which leaves the attempt a few microseconds less), a client `deadline` under
     * half the `timeout`, an enclosing `Deadline::within`, or one around a request's own
     * `timeout`. Before, every such probe was no verdict: against a hung upstream each next
     * call probed at once, the breaker never reopened, and the host sent a probe per deadline
     * instead of one per `open_for`.
     *
     * @dataProvider longCuts
     */
    public function testAProbeThatWaitedHalfItsTimeoutReopensTheBreaker(string $cut): void
    {
        $key = $this->up->key('hung-probe');
        $this->up->script($key, [...array_fill(0, self::MIN_CALLS, ['status' => 503]), ['status' => 200, 'delay_ms' => 3000]]);
        $options = match ($cut) {
            // open_for 0.5 s: reopened, the breaker stays open at least 0.4 s (−20 %), far
            // longer than the two refused calls below take, even on a loaded machine.
            'deadline' => $this->options($key, 0.5, 0.4) + ['deadline' => 0.4],
            'short deadline' => $this->options($key, 0.5, 2.0) + ['deadline' => 0.4],
            'within' => $this->options($key, 0.5, 0.4),
            'request timeout' => $this->options($key, 0.5, 30.0),
        };
        $client = new Client(Run::name('breaker'), $options);
        $this->open($client);
        usleep(650_000); // past open_for + 20 %

        $probe = match ($cut) {
            'deadline', 'short deadline' => fn () => $client->get('/x'),
            'within' => fn () => Deadline::within(0.3, fn () => $client->get('/x')),
            'request timeout' => fn () => Deadline::within(0.4, fn () => $client->get('/x', [], ['timeout' => 0.4])),
        };
        try {
            $probe();
            $this->fail('the probe outlives the deadline');
        } catch (DeadlineExceeded) {
            $this->addToAssertionCount(1);
        }
        $this->expectCircuitOpen($client);
        $this->expectCircuitOpen($client);
        $this->assertCount(self::MIN_CALLS + 1, $this->up->attempts($key, self::MIN_CALLS + 1), 'one probe');
        $snapshot = \Resilient\Metrics::snapshot()[$client->name()]['breaker'];
        $this->assertSame('open', $snapshot['state']);
        $this->assertSame(2, $snapshot['transitions']['open'], 'opened, then reopened by the probe');
    }

    /** @return iterable<string,array{string}> */
    public static function longCuts(): iterable
    {
        yield "the client's deadline, equal to its timeout" => ['deadline'];
        yield "the client's deadline of 0.4, under half its timeout of 2" => ['short deadline'];
        yield 'Deadline::within(0.3) around a timeout of 0.4' => ['within'];
        yield "Deadline::within(0.4) around a request's timeout of 0.4 (the client's: 30)" => ['request timeout'];
    }

    private function expectCircuitOpen(Client $client): void
    {
        try {
            $client->get('/x');
            $this->fail('expected CircuitOpen');
        } catch (CircuitOpen) {
            $this->addToAssertionCount(1);
        }
    }

    /** @return iterable<string,array{string}> */
    public static function schemes(): iterable
    {
        yield 'http' => ['http'];
        yield 'https' => ['https'];
    }

    /**
     * A process out of file descriptors (a leak, `ulimit -n`) cannot connect: its own failure,
     * 'request', not the upstream's 'connect'. Not retried, no outcome for the breaker or the
     * metrics, so the other processes of the host still reach the upstream. Before, each call
     * counted a connection failure, and the third opened the upstream's breaker for every
     * process of the host.
     *
     * @dataProvider schemes
     */
    public function testAProcessOutOfDescriptorsDoesNotOpenTheBreakerForTheHost(string $scheme): void
    {
        $name = Run::name('breaker-fds');
        $options = ['max_attempts' => 3, 'budget' => false, 'backoff' => ['base' => 0.001, 'cap' => 0.001], 'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 3, 'window' => 10.0, 'open_for' => 30.0]];
        if ($scheme === 'http') {
            $key = $this->up->key('fds');
            $this->up->script($key, [['status' => 200]]);
            [$base, $warm] = [$this->up->base($key), str_replace('127.0.0.1', 'localhost', $this->up->base($key))];
            $counted = fn (int $n) => count($this->up->attempts($key, $n));
        } else {
            $nginx = \Resilient\Tests\Harness\TlsNginx::shared();
            $before = count($nginx->requests('ok'));
            [$base, $warm] = [$nginx->url('ok'), $nginx->url('ok', 'localhost')];
            $options['verify'] = $nginx->ca->path('ca.pem');
            $counted = fn (int $n) => count($nginx->waitForRequests('ok', $before + $n)) - $before;
        }
        $options['base_url'] = $base;
        // Warmed up on another origin (the runtime and TLS set up, one connection kept), then
        // every descriptor taken: the calls to `base_url` need a new connection.
        $code = sprintf('$c = new Resilient\Client(%s, %s); $c->get(%s . "/hello");
            $fds = []; while (($f = @fopen("/dev/null", "r")) !== false) { $fds[] = $f; }
            $out = [];
            for ($i = 0; $i < 4; $i++) {
                try { $c->get("/hello"); $out[] = "ok"; } catch (Resilient\Unavailable $e) { $out[] = $e->failure() ?? get_class($e); }
            }
            $fds = [];
            echo json_encode(["calls" => $out, "failures" => Resilient\Metrics::snapshot()[%1$s]["failures"]]);',
            var_export($name, true), var_export($options, true), var_export($warm, true));
        $cmd = ['bash', '-c', 'ulimit -n 64 && exec "$0" "$@"', Run::root() . '/tests/harness/php.sh', '-d', 'resilient.shm_path=' . ini_get('resilient.shm_path'), '-r', $code];
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, Run::root());
        $stdout = stream_get_contents($pipes[1]);
        $stderr = stream_get_contents($pipes[2]);
        $this->assertSame(0, proc_close($proc), "$stdout\n$stderr");
        $r = json_decode($stdout, true);
        $this->assertSame(['request', 'request', 'request', 'request'], $r['calls'] ?? null, "$stdout\n$stderr");
        $this->assertSame(0, $r['failures']['connection'], $stdout);

        $this->assertSame(200, (new Client($name, $options))->get('/hello')->status(), 'the breaker stayed closed for the host');
        $this->assertSame(2, $counted(2), 'the warm-up and the healthy call, nothing from the process out of descriptors');
    }
}
