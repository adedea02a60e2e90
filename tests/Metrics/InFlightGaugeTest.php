<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Funnel;
use Resilient\Metrics;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * The `in_flight` gauge counts attempts sent and not yet ended. A fatal error while an attempt
 * is in flight (a signal handler's, max_execution_time's) long-jumps past the Rust frames that
 * would end it: the request's end ends it instead, as it releases the funnel slot. (A process
 * killed with SIGKILL runs no request end: that one stays counted, see the README.)
 */
final class InFlightGaugeTest extends TestCase
{
    public function testAFatalErrorMidAttemptLeavesNoAttemptCountedInFlight(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('inflight-fatal');
        $up->script($key, [['delay_ms' => 5000]]);
        $name = Run::name('inflight-fatal');
        $code = sprintf(
            'pcntl_async_signals(true);'
            . 'pcntl_signal(SIGALRM, function () { trigger_error("fatal while the attempt is in flight", E_USER_ERROR); });'
            . 'pcntl_alarm(1);'
            . '$c = new Resilient\Client(%s, ["base_url" => %s, "timeout" => 10, "max_attempts" => 1, "funnel" => ["limit" => 4]]);'
            . '$c->get("/slow");',
            var_export($name, true),
            var_export($up->base($key), true),
        );
        $r = PhpProcess::runCode($code, [], 20);
        $this->assertStringContainsString('fatal while the attempt is in flight', $r->stdout . $r->stderr, $r->describe());
        $this->assertCount(1, $up->attempts($key, 1, 5000, false), 'the attempt reached the upstream');

        $entry = Metrics::snapshot()[$name];
        $this->assertSame(1, $entry['attempts']);
        $this->assertSame(0, $entry['in_flight'], 'the attempt cut by the fatal error is no longer counted in flight');
        $this->assertSame(0, (new Funnel($name, 4))->inFlight(), 'nor its funnel slot');
    }

    /**
     * `max_execution_time` expiring mid-call (PHP's timer is SIGPROF; sent here by hand, as the
     * CPU-time timer never fires while a call waits) ends the call before its fatal error, so the
     * shutdown functions that run next (a framework's error reporting, which may itself call
     * the upstream) find the funnel slot free and nothing counted in flight.
     */
    public function testAnExpiredTimeLimitGivesTheSlotBackBeforeTheShutdownFunctions(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('inflight-timeout');
        $up->script($key, [['delay_ms' => 5000], ['status' => 200]]);
        $name = Run::name('inflight-timeout');
        $seen = $this->seenAfterTheTimeLimit($name, 1, sprintf(
            '$c = new Resilient\Client(%s, ["base_url" => %s, "timeout" => 10, "max_attempts" => 1, "funnel" => ["limit" => 1, "reserve" => 0]]);'
            . 'exec(sprintf("(sleep 0.5; kill -PROF %%d) >/dev/null 2>&1 &", getmypid()));'
            . '$c->get("/slow");',
            var_export($name, true),
            var_export($up->base($key), true),
        ), $up->base($key) . '/again');
        $this->assertSame(['funnel' => 0, 'gauge' => 0, 'next_call' => 200], $seen);
    }

    /**
     * The same when the time limit lands inside `on_attempt` (here while it handles one pool
     * request's answer and the other request is still in flight, as Laravel's event reporter
     * may be): the engine raises the fatal error inside the callback, and the pool is ended
     * before it goes on.
     */
    public function testAnExpiredTimeLimitInsideOnAttemptEndsThePoolFirst(): void
    {
        $up = MockUpstream::shared();
        [$fast, $slow, $after] = [$up->key('inflight-cb-fast'), $up->key('inflight-cb-slow'), $up->key('inflight-cb-after')];
        $up->script($fast, [['status' => 404]]);
        $up->script($slow, [['delay_ms' => 5000]]);
        $up->script($after, [['status' => 200]]);
        $name = Run::name('inflight-cb');
        $seen = $this->seenAfterTheTimeLimit($name, 2, sprintf(
            '$c = new Resilient\Client(%s, ["timeout" => 10, "max_attempts" => 1, "funnel" => ["limit" => 2, "reserve" => 0],'
            . '  "on_attempt" => function (array $a) { if ($a["status"] === 404) {'
            . '    exec(sprintf("(sleep 0.3; kill -PROF %%d) >/dev/null 2>&1 &", getmypid()));'
            . '    $until = hrtime(true) + 3e9; while (hrtime(true) < $until) {} } }]);'
            . '$c->pool(["fast" => ["GET", %s], "slow" => ["GET", %s]], 2);',
            var_export($name, true),
            var_export($up->base($fast) . '/f', true),
            var_export($up->base($slow) . '/s', true),
        ), $up->base($after) . '/a');
        $this->assertSame(['funnel' => 0, 'gauge' => 0, 'next_call' => 200], $seen);
    }

    /**
     * The same inside `on_attempt` for a single call's last attempt, whose record arrives with
     * the call's end: the fatal error goes on (the script stops), and is not swallowed by a
     * call that returns its response.
     */
    public function testAnExpiredTimeLimitInsideOnAttemptForTheLastAttemptStopsTheScript(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('inflight-cb-last');
        $up->script($key, [['status' => 200]]);
        $code = sprintf(
            '$c = new Resilient\Client(%s, ["base_url" => %s, "max_attempts" => 1,'
            . '  "on_attempt" => function (array $a) { set_time_limit(1); while (true) {} }]);'
            . 'try { $s = $c->get("/x")->status(); echo "STATUS $s\n"; } catch (Throwable $e) { echo "CAUGHT ", get_class($e), "\n"; }'
            . 'echo "CONTINUED\n";',
            var_export(Run::name('inflight-cb-last'), true),
            var_export($up->base($key), true),
        );
        $r = PhpProcess::runCode($code, [], 20);
        $this->assertStringContainsString('Maximum execution time', $r->stdout . $r->stderr, $r->describe());
        $this->assertStringNotContainsString('STATUS', $r->stdout, $r->describe());
        $this->assertStringNotContainsString('CONTINUED', $r->stdout, $r->describe());
    }

    /**
     * A process killed mid-attempt (SIGKILL: `queue:work --timeout`; FPM's
     * request_terminate_timeout and a reload under traffic end workers alike) runs no request
     * end: `in_flight` keeps its attempt for good, but `funnel_in_flight` (the funnel's slots held
     * on this host, those of dead holders not counted) reads 0 at once, in the snapshot and in
     * the Prometheus text. Before, nothing a scrape read followed the funnel's exact count.
     */
    public function testAProcessKilledMidAttemptLeavesTheFunnelsGaugeExact(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('inflight-killed');
        $up->script($key, [['delay_ms' => 10000]]);
        $name = Run::name('inflight-killed');
        $p = PhpProcess::code(sprintf(
            '$c = new Resilient\Client(%s, ["base_url" => %s, "timeout" => 20, "max_attempts" => 1, "funnel" => ["limit" => 4]]);'
            . '$c->get("/slow");',
            var_export($name, true),
            var_export($up->base($key), true),
        ));
        $this->assertCount(1, $up->attempts($key, 1, 10000, false), 'the attempt reached the upstream');
        $held = Metrics::snapshot()[$name];
        $this->assertSame([1, 1], [$held['in_flight'], $held['funnel_in_flight']], 'while it is in flight');
        $p->signal(SIGKILL);
        $p->wait(10);

        $entry = Metrics::snapshot()[$name];
        $this->assertSame(1, $entry['in_flight'], 'the attempt gauge keeps what a killed process never ended');
        $this->assertSame(0, $entry['funnel_in_flight'], "a dead holder's slot is not counted");
        $text = Metrics::prometheus();
        $this->assertStringContainsString(sprintf("resilient_funnel_in_flight{upstream=\"%s\"} 0\n", $name), $text);
        // Beside it, the limit it is measured against (the client's fixed one).
        $this->assertSame(4, $entry['funnel_limit']);
        $this->assertStringContainsString(sprintf("resilient_funnel_limit{upstream=\"%s\"} 4\n", $name), $text);
        $this->assertSame(0, (new Funnel($name, 4))->inFlight());

        // A name whose calls take no funnel slot has none.
        $plain = Run::name('inflight-plain');
        $up->script($up->key('inflight-plain'), [['status' => 200]]);
        (new \Resilient\Client($plain, ['base_url' => $up->base($up->key('inflight-plain')), 'funnel' => false]))->get('/x');
        $this->assertArrayHasKey('funnel_in_flight', Metrics::snapshot()[$plain]);
        $this->assertNull(Metrics::snapshot()[$plain]['funnel_in_flight']);
        $this->assertNull(Metrics::snapshot()[$plain]['funnel_limit']);
        $this->assertStringNotContainsString(sprintf('resilient_funnel_in_flight{upstream="%s"}', $plain), Metrics::prometheus());
    }

    /**
     * Runs $call in a child whose time limit then runs out, and returns what a shutdown function
     * found: the slots held in $name's funnel (of $limit), its in-flight gauge, and the status of
     * one more call to $next through a funnel of 1 of that name (or the exception's class).
     */
    private function seenAfterTheTimeLimit(string $name, int $limit, string $call, string $next): array
    {
        $code = sprintf(
            'register_shutdown_function(function () {'
            . '  $seen = ["funnel" => (new Resilient\Funnel(%1$s, %2$d, 0))->inFlight(), "gauge" => Resilient\Metrics::snapshot()[%1$s]["in_flight"]];'
            . '  try { $seen["next_call"] = (new Resilient\Client(%1$s, ["funnel" => ["limit" => 1, "reserve" => 0]]))->get(%3$s)->status(); } catch (Throwable $e) { $seen["next_call"] = get_class($e); }'
            . '  echo "\nSEEN ", json_encode($seen), "\n";'
            . '});'
            . 'set_time_limit(100);',
            var_export($name, true),
            $limit,
            var_export($next, true),
        ) . $call;
        $r = PhpProcess::runCode($code, [], 20);
        $this->assertStringContainsString('Maximum execution time', $r->stdout . $r->stderr, $r->describe());
        $this->assertSame(1, preg_match('/^SEEN (.*)$/m', $r->stdout, $m), $r->describe());

        return json_decode($m[1], true);
    }
}
