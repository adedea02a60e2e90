<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\Run;

/**
 * `on_attempt`, the single recording point: called once per attempt while the call is in
 * progress, with the URL stripped of its query; a throwing callable cancels the call (its
 * exception propagates, the funnel slot comes back); the callable may itself make calls.
 */
final class OnAttemptTest extends HttpTestCase
{
    public function testRecordsArriveDuringTheCallOnePerAttempt(): void
    {
        $key = $this->up->key('onattempt');
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => '1']], ['status' => 200]]);
        $seen = [];
        $client = $this->client($key, ['on_attempt' => function (array $a) use (&$seen): void {
            $seen[] = $a + ['at' => microtime(true)];
        }]);
        $r = $client->get('/quote', ['token' => 's3cret']);
        $end = microtime(true);
        $this->assertSame(2, $r->attempts());
        $this->assertCount(2, $seen);
        $this->assertGreaterThan(0.9, $end - $seen[0]['at'], 'the first record came before the Retry-After sleep, not at the end');
        $this->assertSame($this->up->base($key) . '/quote', $seen[0]['url']);
        $this->assertStringNotContainsString('s3cret', json_encode($seen));
        $this->assertSame(['client', 'method', 'url', 'attempt', 'status', 'error', 'duration_ms', 'retry_follows', 'gives_up', 'reason', 'at'], array_keys($seen[0]));
        $this->assertSame([false, false], array_column($seen, 'gives_up'), 'the call got its answer');
        $this->assertSame([1, 2], array_column($seen, 'attempt'));
        $this->assertSame('GET', $seen[1]['method']);
    }

    /** `gives_up`: the call fails after this attempt (it throws), whatever the attempt got. */
    public function testTheLastAttemptOfAFailingCallSaysSo(): void
    {
        $key = $this->up->key('onattempt-gives-up');
        $this->up->script($key, [['status' => 429], ['status' => 429]]);
        $seen = [];
        $client = $this->client($key, ['max_attempts' => 2, 'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'on_attempt' => function (array $a) use (&$seen): void {
                $seen[] = $a;
            }]);
        try {
            $client->get('/quote');
            $this->fail('expected UpstreamFailed');
        } catch (\Resilient\UpstreamFailed $e) {
            $this->assertSame(429, $e->getCode());
        }
        $this->assertSame([[true, false], [false, true]], array_map(fn ($a) => [$a['retry_follows'], $a['gives_up']], $seen));
    }

    public function testAThrowingCallableCancelsTheCallAndFreesTheSlot(): void
    {
        $key = $this->up->key('onthrow');
        $this->up->script($key, [['status' => 503]]);
        $name = Run::name('onthrow');
        $client = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key),
            'funnel' => ['limit' => 1],
            'on_attempt' => function (array $a): void {
                throw new \DomainException('recorder failed at attempt ' . $a['attempt']);
            },
        ]);
        try {
            $client->get('/x');
            $this->fail('expected the callable\'s exception');
        } catch (\DomainException $e) {
            $this->assertSame('recorder failed at attempt 1', $e->getMessage());
        }
        $this->assertCount(1, $this->up->attempts($key, 1), 'cancelled before the retry');
        $this->assertSame(0, (new \Resilient\Funnel($name, 1))->inFlight());

        // The last attempt's record arrives with the call's end: its exception is the call's
        // too, the fallback not asked.
        $last = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key),
            'max_attempts' => 1,
            'on_attempt' => function (array $a): void {
                throw new \DomainException('recorder failed at the last attempt');
            },
            'fallback' => function (): string {
                throw new \LogicException('the fallback was asked');
            },
        ]);
        try {
            $last->get('/y');
            $this->fail('expected the callable\'s exception');
        } catch (\DomainException $e) {
            $this->assertSame('recorder failed at the last attempt', $e->getMessage());
        }
    }

    public function testAThrowingCallableCancelsAPoolAndItsSlotsComeBackAtOnce(): void
    {
        // One request answers fast, the other hangs: when the fast one's record throws, the
        // hanging one is in flight holding a slot. Cancelling must give it back now, not at the
        // next call or at lease expiry.
        $key = $this->up->key('poolthrow');
        $this->up->script($key, [['status' => 200]], 'repeat_last', '/fast');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]], 'repeat_last', '/slow');
        $name = Run::name('poolthrow');
        $client = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key),
            'funnel' => ['limit' => 4, 'lease' => 60.0],
            'timeout' => 5.0,
            'on_attempt' => function (array $a): void {
                throw new \DomainException('recorder failed');
            },
        ]);
        try {
            $client->pool(['slow' => ['GET', '/slow'], 'fast' => ['GET', '/fast']], concurrency: 2);
            $this->fail('expected the callable\'s exception');
        } catch (\DomainException $e) {
            $this->assertSame('recorder failed', $e->getMessage());
        }
        $this->assertSame(0, (new \Resilient\Funnel($name, 4))->inFlight(), 'the hanging request\'s slot is back');
    }

    /**
     * The same with 300 requests in flight or waiting for a slot: before, the runtime was run
     * three passes after the cancel, which drop about 180 of the aborted tasks; the rest kept
     * their slots (and the in-flight gauge) until this process's next call or their leases'
     * end (another process got 6 of the 64 slots meanwhile).
     */
    public function testAThrowingCallableCancelsALargePoolAndEverySlotComesBackAtOnce(): void
    {
        $key = $this->up->key('poolthrow-large');
        $this->up->script($key, [['status' => 200]], 'repeat_last', '/fast');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]], 'repeat_last', '/slow');
        $name = Run::name('poolthrow-large');
        $client = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key),
            'funnel' => ['limit' => 64, 'wait' => 5.0, 'lease' => 60.0],
            'timeout' => 5.0,
            'on_attempt' => function (array $a): void {
                throw new \DomainException('recorder failed');
            },
        ]);
        $requests = ['fast' => ['GET', '/fast']];
        for ($i = 0; $i < 300; $i++) {
            $requests["slow$i"] = ['GET', '/slow'];
        }
        try {
            $client->pool($requests, concurrency: 1024);
            $this->fail('expected the callable\'s exception');
        } catch (\DomainException $e) {
            $this->assertSame('recorder failed', $e->getMessage());
        }
        $this->assertSame(0, (new \Resilient\Funnel($name, 64))->inFlight(), 'every slot is back');
        $this->assertSame(0, \Resilient\Metrics::snapshot()[$name]['in_flight'], 'no attempt is counted in flight');
    }

    public function testTheCallableMayMakeCallsItself(): void
    {
        $key = $this->up->key('onnested');
        $this->up->script($key, [['status' => 200]]);
        $log = $this->client($key);
        $inner = [];
        $client = $this->client($key, ['on_attempt' => function (array $a) use ($log, &$inner): void {
            $inner[] = $log->post('/log', ['attempt' => $a['attempt']])->status();
        }]);
        $this->assertSame(200, $client->get('/main')->status());
        $this->assertSame([200], $inner);
        $this->assertSame(['/main', '/log'], array_column($this->up->attempts($key, 2), 'path'));
    }

    public function testASlowCallableCountsInTheDeadlineAndNoAttemptStartsPastIt(): void
    {
        // The callable runs between attempts and cannot be interrupted; when
        // it returns past the deadline the call stops with DeadlineExceeded instead of making
        // another attempt.
        $key = $this->up->key('onslow');
        $this->up->script($key, [['status' => 503]]);
        $client = $this->client($key, [
            'deadline' => 1.0,
            'max_attempts' => 5,
            'budget' => false,
            'backoff' => ['base' => 0.001, 'cap' => 0.001],
            'on_attempt' => function (array $a): void {
                usleep(1_200_000);
            },
        ]);
        $t = hrtime(true);
        try {
            $client->get('/slow-callable');
            $this->fail('expected DeadlineExceeded');
        } catch (\Resilient\DeadlineExceeded $e) {
            $this->assertSame(503, $e->response()?->status());
            $this->assertStringContainsString('left before attempt 2', $e->getMessage());
        }
        $elapsedMs = (hrtime(true) - $t) / 1e6;
        $this->assertLessThan(1500.0, $elapsedMs, 'ended when the callable returned');
        $this->assertCount(1, $this->up->attempts($key, 1), 'no attempt after the deadline');
    }
}
