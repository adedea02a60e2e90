<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Funnel;
use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\Http;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Whatever way an FPM request ends, it leaves nothing behind in its worker or in shared memory:
 * - a lease held when the request dies of a fatal error, of max_execution_time or of exit()
 *   (lease kept in a global / a reference cycle, so no destructor runs) is released at request
 *   end (RSHUTDOWN) — not by dead-pid reclaim (the worker lives on) nor by expiry (lease 60 s);
 * - must show 5 (FPM part): a deadline open when a request ends (exit or fatal inside
 *   Deadline::within) is not seen by the next request of the same worker ("solo" pool, 1 worker).
 */
final class RequestEndTest extends TestCase
{
    private FpmServer $fpm;

    protected function setUp(): void
    {
        $this->fpm = FpmServer::shared();
    }

    /** @return iterable<string,array{string}> */
    public static function hardEndings(): iterable
    {
        yield 'fatal error' => ['hold_then_fatal'];
        yield 'max_execution_time' => ['hold_then_timeout'];
        yield 'exit with the lease in a cycle' => ['hold_then_exit'];
    }

    /** @dataProvider hardEndings */
    public function testLeaseHeldAtAHardRequestEndIsReleased(string $action): void
    {
        $name = Run::name('rshutdown');
        $token = bin2hex(random_bytes(4));
        $started = microtime(true);
        $r = Http::get($this->fpm->url('/?' . http_build_query(['do' => $action, 'name' => $name, 'limit' => 1, 'lease' => 60.0, 'token' => $token])), 30);
        $marker = $this->fpm->signalDir() . "/held-$token";
        $this->assertFileExists($marker, "the request never took its lease: HTTP {$r->status} {$r->body}\n" . $this->fpm->logs());
        $workerPid = (int) file_get_contents($marker);

        $funnel = new Funnel($name, limit: 1);
        [, $waited] = $this->waitFor(fn () => $funnel->inFlight() === 0, 5.0, "the lease of the request ended by $action to be released");
        $this->assertTrue(posix_kill($workerPid, 0), 'the worker is alive, so this was not a dead-pid reclaim');
        $this->assertLessThan(30, microtime(true) - $started, 'and not a lease expiry (60 s)');
        if ($action !== 'hold_then_exit') {
            $this->assertGreaterThanOrEqual(500, $r->status, "a $action request should fail: {$r->body}");
            // Given back as the error was raised, so the request's shutdown function found the
            // slot free (an exit ends no code by error: the lease kept in a global is still held).
            $seen = json_decode((string) @file_get_contents($this->fpm->signalDir() . "/shutdown-$token"), true);
            $this->assertSame(['in_flight' => 0, 'acquired' => true], $seen, "what the shutdown function of the request ended by $action found");
        }
        fwrite(STDERR, sprintf("\n[rshutdown] %s: lease free %.0f ms after the response\n", $action, $waited * 1000));

        // And the slot is usable again, from the web too.
        $ok = $this->fpm->getJson('/?' . http_build_query(['do' => 'in_flight', 'name' => $name, 'limit' => 1]));
        $this->assertSame(0, $ok['in_flight']);
    }

    /**
     * A pool cut short by a fatal error leaves tasks on the worker's runtime; they must not run
     * on during the worker's next request (which drives the same runtime). Seen in the name's
     * metrics: an orphan that finished its attempt there would record it.
     */
    public function testAPoolCutShortByAFatalErrorDoesNotRunOnInTheNextRequest(): void
    {
        require_once __DIR__ . '/../Http/support/MockUpstream.php';
        $up = \Resilient\Tests\Http\MockUpstream::shared();
        $key = $up->key('pool-fatal');
        // The first answer waits 100 ms, so the other two are surely sent before the fatal error
        // its on_attempt raises (an answer at once could beat their connects).
        $up->script($key, [['status' => 200, 'delay_ms' => 100], ['delay_ms' => 2000], ['delay_ms' => 2000]]);
        $slowKey = $up->key('pool-fatal-next');
        $up->script($slowKey, [['delay_ms' => 3000]]);
        $name = Run::name('pool-fatal');
        $workerBefore = $this->fpm->getJson('/solo/?do=pid')['pid'];

        $first = Http::get($this->fpm->url('/solo/?' . http_build_query(['do' => 'pool_then_fatal', 'name' => $name, 'base' => $up->base($key)])), 30);
        $this->assertSame(500, $first->status, $first->body);
        $this->assertCount(3, $up->attempts($key, 3, 5000, false), 'the three requests reached the upstream');
        // The next request of the same worker drives its runtime past the 2 s the orphans wait.
        $second = $this->fpm->getJson('/solo/?' . http_build_query(['do' => 'slow_call', 'name' => $name . '-next', 'base' => $up->base($slowKey)]));
        $this->assertSame([200, $workerBefore], [$second['status'], $second['pid']]);

        $metrics = \Resilient\Metrics::snapshot()[$name];
        $this->assertSame(3, $metrics['attempts']);
        $this->assertSame(1, $metrics['latency']['success']['count'], 'only the answer before the fatal error was recorded: the others never ran on');
        $this->assertSame(0, $metrics['in_flight']);
    }

    /** @return iterable<string,array{string}> */
    public static function deadlineEndings(): iterable
    {
        yield 'exit inside within()' => ['deadline_exit'];
        yield 'fatal error inside within()' => ['deadline_fatal'];
    }

    /** @dataProvider deadlineEndings */
    public function testNextRequestOfTheSameWorkerSeesNoDeadline(string $action): void
    {
        $workerBefore = $this->fpm->getJson('/solo/?do=pid')['pid'];
        $first = Http::get($this->fpm->url("/solo/?do=$action"), 30);
        if ($action === 'deadline_exit') {
            $data = json_decode($first->body, true);
            $this->assertIsArray($data, $first->body);
            $this->assertGreaterThan(29.0, $data['remaining'], 'inside within(30) the first request sees its deadline');
        } else {
            $this->assertSame(500, $first->status, $first->body);
        }
        $second = $this->fpm->getJson('/solo/?do=deadline_remaining');
        $this->assertNull($second['remaining'], 'a deadline survived into the next request of the worker');
        $this->assertSame($workerBefore, $second['pid'], 'both requests must run in the one solo worker (it survived the request\'s end)');
        if (isset($data['pid'])) {
            $this->assertSame($workerBefore, $data['pid']);
        }
    }
}
