<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/FixtureApp.php';
require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Laravel\Queue\JitteredBackoff;
use Resilient\Laravel\Queue\ReleaseWhenUnavailable;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\ProcessResult;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * The package's job middleware under a real `php artisan queue:work` of the fixture app
 * (Debian's Laravel 8, Redis queue): released jobs are read back from the queue itself
 * (attempts and available_at of the delayed entry), attempts from the mock upstream.
 */
final class QueueTest extends TestCase
{
    /** tests/fixtures/laravel-app/config/resilient.php: resilient.queue.release_delay. */
    private const RELEASE_MIN = 20;
    private const RELEASE_MAX = 40;

    private MockUpstream $up;

    protected function setUp(): void
    {
        $this->up = MockUpstream::shared();
    }

    public static function tearDownAfterClass(): void
    {
        FixtureApp::stopRedis();
    }

    public function testAJobMeetingAFullFunnelIsReleasedInsideTheConfiguredRange(): void
    {
        $key = $this->up->key('lq-full');
        $app = $this->app($key);
        // Another process fills what background callers may use of the client's funnel
        // (shipping: limit 4, reserve 1 → 3 slots for workers).
        $holder = $app->php('$f = new Resilient\Funnel("shipping", 4, 1); $l = [$f->tryAcquire(), $f->tryAcquire(), $f->tryAcquire()];'
            . ' echo count(array_filter($l)), "\n"; sleep(60);');
        $this->assertTrue($holder->waitForOutput(fn ($o) => $o === "3\n", 10), 'the holder took 3 leases');

        for ($i = 0; $i < 6; $i++) {
            $app->dispatch('CallShipping', "full-$i");
        }
        $this->assertSame([0, 0, 0, 0, 0, 0], array_column($app->ready(), 'attempts'));

        $before = time();
        $worker = $this->work($app, ['--stop-when-empty']);
        $after = time();
        $holder->signal(SIGKILL);
        $holder->wait(5);

        $this->assertSame(0, $worker->exitCode, $worker->describe());
        $this->assertSame([], $app->ready());
        $delayed = $app->delayed();
        $this->assertCount(6, $delayed);
        $delays = [];
        foreach ($delayed as $d) {
            $this->assertSame(1, $d['payload']['attempts'], 'the release counted one attempt');
            $this->assertGreaterThanOrEqual($before + self::RELEASE_MIN, $d['available_at']);
            // + 1: a release is counted from the next whole second (Released::job()).
            $this->assertLessThanOrEqual($after + self::RELEASE_MAX + 1, $d['available_at']);
            $delays[$d['available_at']] = true;
        }
        $this->assertGreaterThan(1, count($delays), 'released jobs come back spread out, not at one second');
        for ($i = 0; $i < 6; $i++) {
            $this->assertSame('Resilient\\FunnelFull', $app->outcomes("full-$i")[0]['exception']);
        }
        $this->assertSame([], $this->up->attempts($key), 'nothing reached the upstream');
    }

    /**
     * A 503 with `Retry-After: 7` releases the job no sooner than that, nor than its own backoff
     * for the attempt (CallShipping's first range, [30, 90] s): a release counts as an attempt,
     * and before, an outage answered with a short Retry-After used up the job's `$tries` within
     * seconds.
     */
    public function testA503WithRetryAfterComesBackNoSoonerThanItNorTheJobsBackoff(): void
    {
        $key = $this->up->key('lq-ra');
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => '7']]]);
        $app = $this->app($key);
        $app->dispatch('CallShipping', 'ra');

        $before = time();
        $worker = $this->work($app);
        $after = time();
        $this->assertSame(0, $worker->exitCode, $worker->describe());

        $this->assertCount(1, $this->up->attempts($key, 1));
        $this->assertSame('Resilient\\UpstreamFailed', $app->outcomes('ra')[0]['exception']);
        [$d] = $app->delayed();
        $this->assertSame(1, $d['payload']['attempts']);
        $this->assertGreaterThanOrEqual(30, $d['available_at'] - $before, 'available again no sooner than the backoff');
        // The backoff's range ([30, 90]), spread as a Retry-After is (up to a tenth more), not
        // the refusal range; counted from when the worker returned, however long the framework
        // took to boot.
        $this->assertLessThanOrEqual(90 + intdiv(90, 10) + 1, $d['available_at'] - $after);
    }

    public function testWithinDeadlineEndsAHangingCallBeforeTheJobTimeout(): void
    {
        $key = $this->up->key('lq-hang');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20_000]]);
        $app = $this->app($key);
        $app->dispatch('HangingCall', 'hang');

        $start = microtime(true);
        $worker = $this->work($app);
        $took = microtime(true) - $start;

        // HangingCall: $timeout = 4, margin 1 s (resilient.queue.deadline_margin): the call ends at
        // 3 s with our exception, and the worker finishes the job instead of killing it at 4 s.
        $this->assertSame(0, $worker->exitCode, $worker->describe());
        $this->assertStringContainsString('Processed:  App\\Jobs\\HangingCall', $worker->stdout);
        [$outcome] = $app->outcomes('hang');
        $this->assertTrue(is_subclass_of($outcome['exception'], \Resilient\Unavailable::class), $outcome['exception']);
        $this->assertGreaterThan(2.8, $outcome['elapsed']);
        $this->assertLessThan(3.5, $outcome['elapsed']);
        $this->assertLessThan(4.0 + 2.0, $took, 'the worker was not held to its own timeout');
        $this->assertCount(1, $this->up->attempts($key, 1, 5000, false));
    }

    public function testTheFunnelMiddlewareHoldsALeaseWhileTheJobRunsAndReleasesWhenFull(): void
    {
        $app = $this->app($this->up->key('lq-sap'));
        $sap = fn () => PhpProcess::runCode('echo (new Resilient\Funnel("sap", 3, 1))->inFlight();', $app->ini())->stdout;

        // Free: the job runs holding one lease, seen host-wide, and gives it back after.
        $app->dispatch('SyncSap', 'free');
        $this->assertSame(0, $this->work($app)->exitCode);
        $this->assertSame(1, $app->outcomes('free')[0]['in_flight']);
        $this->assertSame('0', $sap());

        // Throwing: the lease is given back too, and Laravel retries the job after its backoff.
        $app->dispatch('SyncSap', 'boom', 'boom');
        $this->assertSame(0, $this->work($app)->exitCode);
        $this->assertSame(1, $app->outcomes('boom')[0]['in_flight']);
        $this->assertSame('0', $sap());
        $this->assertCount(1, $app->delayed());

        // Full: two background leases held elsewhere (limit 3 − reserve 1): the job does not run,
        // it is released at once; the worker never waits for a slot.
        $holder = $app->php('$f = new Resilient\Funnel("sap", 3, 1); $a = $f->tryAcquire(); $b = $f->tryAcquire();'
            . ' echo ($a && $b) ? "held\n" : "no\n"; sleep(60);');
        $this->assertTrue($holder->waitForOutput(fn ($o) => $o === "held\n", 10));
        $app->dispatch('SyncSap', 'full');
        $before = time();
        $start = microtime(true);
        $worker = $this->work($app);
        $took = microtime(true) - $start;
        $holder->signal(SIGKILL);
        $holder->wait(5);

        $this->assertSame(0, $worker->exitCode, $worker->describe());
        $this->assertSame([], $app->outcomes('full'), 'handle() never ran');
        $this->assertLessThan(3.0, $took, 'released, not blocked');
        $released = array_values(array_filter($app->delayed(), fn ($d) => str_contains($d['payload']['data']['command'], '"full"')));
        $this->assertCount(1, $released);
        $this->assertSame(1, $released[0]['payload']['attempts']);
        $this->assertGreaterThanOrEqual($before + self::RELEASE_MIN, $released[0]['available_at']);
        $this->assertLessThanOrEqual(time() + self::RELEASE_MAX + 1, $released[0]['available_at']);
    }

    /**
     * `queue:work --once` arms no alarm: a job outliving its `$timeout` (OutlivesTimeout: 1 s,
     * 4 s of work) runs to its end, so its slot must be held as long. Before, the lease was the
     * timeout plus a second: a third worker started after it lapsed ran a third job on a funnel
     * of 2. Counted from the times the jobs recorded, not from the funnel.
     */
    public function testTheFunnelHoldsTheSlotOfAJobNoAlarmEndsUntilItEnds(): void
    {
        $app = $this->app($this->up->key('lq-outlive'));
        for ($i = 0; $i < 3; $i++) {
            $app->dispatch('OutlivesTimeout', 'outlive');
        }
        $once = fn () => $app->start(['queue:work', 'redis', "--queue={$app->queue}", '--sleep=0', '--once']);
        $workers = [$once(), $once()];
        $this->waitFor(fn () => count(array_column($app->outcomes('outlive'), 'started')) === 2, 15, 'two jobs to start', 0.05);
        // A lease of the timeout plus a second, taken before its job started, has lapsed 2.3 s
        // after the later start.
        usleep((int) max(0, (max(array_column($app->outcomes('outlive'), 'started')) + 2.3 - microtime(true)) * 1e6));
        $workers[] = $once();
        foreach ($workers as $worker) {
            $result = $worker->wait(30);
            $this->assertSame(0, $result->exitCode, $result->describe());
        }

        $runs = [];
        foreach ($app->outcomes('outlive') as $o) {
            $runs[$o['pid']] = ($runs[$o['pid']] ?? []) + $o;
        }
        $most = 0;
        foreach ($runs as $run) {
            $most = max($most, count(array_filter($runs, fn ($r) => $r['started'] <= $run['started'] && $run['started'] < ($r['ended'] ?? INF))));
        }
        $this->assertSame(2, $most, 'at most 2 jobs ran at once: ' . json_encode(array_values($runs)));
        $this->assertCount(1, $app->delayed(), 'the third was released: the funnel was full');
    }

    public function testJitteredBackoffDrawsFreshSecondsAtEveryDispatch(): void
    {
        $app = $this->app($this->up->key('lq-backoff'));
        for ($i = 0; $i < 5; $i++) {
            $app->dispatch('JitteredReport');
        }
        $seen = [];
        foreach ($app->ready() as $payload) {
            [$first, $second] = array_map('intval', explode(',', $payload['backoff']));
            $this->assertGreaterThanOrEqual(240, $first);
            $this->assertLessThanOrEqual(360, $first);
            $this->assertGreaterThanOrEqual(540, $second);
            $this->assertLessThanOrEqual(660, $second);
            $seen[$payload['backoff']] = true;
        }
        $this->assertCount(5, $app->ready());
        $this->assertGreaterThan(1, count($seen));
    }

    public function testTheReleaseDelayFollowsTheException(): void
    {
        require_once '/usr/share/php/Illuminate/autoload.php';
        require_once __DIR__ . '/../../php/autoload.php';
        $key = $this->up->key('lq-delay');
        $in = time() + 9;
        $this->up->script($key, [
            ['status' => 503, 'headers' => ['Retry-After' => gmdate('D, d M Y H:i:s \G\M\T', $in)]],
            ['status' => 503],
        ]);
        $client = new \Resilient\Client(\Resilient\Tests\Harness\Run::name('lq-delay'), ['base_url' => $this->up->base($key), 'max_attempts' => 1]);
        $job = new class {
            public array $released = [];
            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        $middleware = new ReleaseWhenUnavailable(3, 5);

        // Retry-After as an HTTP-date: no sooner than that date.
        $middleware->handle($job, fn () => $client->get('/x'));
        $this->assertGreaterThanOrEqual($in - time(), $job->released[0]);
        $this->assertLessThanOrEqual(9 + 1 + 1, $job->released[0]);

        // Our refusals: the range.
        foreach ([new \Resilient\FunnelFull('full'), new \Resilient\BudgetExhausted('spent'), new \Resilient\CircuitOpen('open')] as $e) {
            $middleware->handle($job, fn () => throw $e);
            $this->assertContains(end($job->released), [3, 4, 5]);
        }
        $this->assertCount(4, $job->released);

        // Not ours to absorb: a 503 without Retry-After, a deadline, anything else.
        foreach ([fn () => $client->get('/x'), fn () => throw new \Resilient\DeadlineExceeded('late'), fn () => throw new \LogicException('bug')] as $fn) {
            try {
                $middleware->handle($job, $fn);
                $this->fail('rethrown');
            } catch (\Resilient\UpstreamFailed | \Resilient\DeadlineExceeded | \LogicException) {
            }
        }
        $this->assertCount(4, $job->released);
    }

    /**
     * Through `Http::resilient()` a 503 that outlasted the client's attempts comes back as a
     * Laravel response, and `->throw()` makes it a RequestException: its Retry-After is obeyed
     * as the client's UpstreamFailed's is. Only for 429 and 503 (a 500's is not a wait).
     */
    public function testARequestExceptionWithRetryAfterIsReleasedNoSoonerThanIt(): void
    {
        require_once '/usr/share/php/Illuminate/autoload.php';
        require_once '/usr/share/php/GuzzleHttp/autoload.php';
        require_once __DIR__ . '/../../php/autoload.php';
        $failed = fn (int $status, array $headers) => new \Illuminate\Http\Client\RequestException(
            new \Illuminate\Http\Client\Response(new \GuzzleHttp\Psr7\Response($status, $headers)),
        );
        $job = new class {
            public array $released = [];
            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        $middleware = new ReleaseWhenUnavailable(3, 5);
        foreach ([503, 429] as $status) {
            $middleware->handle($job, fn () => throw $failed($status, ['Retry-After' => '40']));
            $this->assertGreaterThanOrEqual(40, end($job->released), "$status");
            $this->assertLessThanOrEqual(40 + 1 + 4, end($job->released));
        }
        foreach ([[500, ['Retry-After' => '40']], [503, []], [503, ['Retry-After' => 'soon']]] as [$status, $headers]) {
            try {
                $middleware->handle($job, fn () => throw $failed($status, $headers));
                $this->fail("released: $status " . json_encode($headers));
            } catch (\Illuminate\Http\Client\RequestException) {
            }
        }
        $this->assertCount(2, $job->released);
    }

    public function testJitteredBackoffReleaseDelayFollowsTheAttempt(): void
    {
        require_once __DIR__ . '/../../php/autoload.php';
        $job = new class {
            use JitteredBackoff;
            public int $attempt = 1;
            public function attempts(): int
            {
                return $this->attempt;
            }
        };
        $this->assertThat($job->releaseDelay(), $this->logicalAnd($this->greaterThanOrEqual(240), $this->lessThanOrEqual(360)));
        $job->attempt = 2;
        $this->assertThat($job->releaseDelay(), $this->logicalAnd($this->greaterThanOrEqual(540), $this->lessThanOrEqual(660)));
        $job->attempt = 7;   // past the last range: the last range again
        $this->assertThat($job->releaseDelay(), $this->logicalAnd($this->greaterThanOrEqual(540), $this->lessThanOrEqual(660)));
    }

    private function app(string $key): FixtureApp
    {
        return new FixtureApp(['FIXTURE_UPSTREAM' => $this->up->base($key)]);
    }

    /** A real worker: one job (or until the queue is empty), as production runs it. */
    private function work(FixtureApp $app, array $options = ['--once']): ProcessResult
    {
        return $app->artisan(['queue:work', 'redis', "--queue={$app->queue}", '--sleep=0', ...$options], [], 30);
    }
}
