<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\DeadlineExceeded;
use Resilient\Response;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * Must show 9: `pool` with concurrency 5 over 20 requests where one hangs: the upstream never sees
 * more than 5 at once, and the other 19 finish without waiting for the slow one (a sliding
 * window, not chunks). Results are keyed like the input; failures are values. Plus the batch
 * rule: when more than half of the first attempts fail, no retry round.
 */
final class PoolTest extends HttpTestCase
{
    public function testSlidingWindowOfFiveWithOneHangingRequest(): void
    {
        $key = $this->up->key('pool');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 100, 'body' => 'ok']]);
        $this->up->script($key, [['hang' => true, 'hang_ms' => 10000]], 'repeat_last', '/sku/slow');
        $client = $this->client($key, ['timeout' => 3, 'max_attempts' => 1]);
        $requests = [];
        for ($i = 0; $i < 20; $i++) {
            $requests["sku-$i"] = ['GET', $i === 2 ? '/sku/slow' : "/sku/$i"];
        }
        $t = hrtime(true);
        $results = $client->pool($requests, 5);
        $elapsedMs = (hrtime(true) - $t) / 1e6;

        $this->assertSame(array_keys($requests), array_keys($results), 'results keyed like the input, in order');
        foreach ($results as $k => $r) {
            if ($k === 'sku-2') {
                $this->assertInstanceOf(UpstreamFailed::class, $r);
            } else {
                $this->assertInstanceOf(Response::class, $r, $k);
                $this->assertSame('ok', $r->body());
            }
        }
        $attempts = $this->up->attempts($key, 20);
        $this->assertCount(20, $attempts);
        $this->assertLessThanOrEqual(5, max(array_column($attempts, 'max_concurrent')), 'never more than 5 at once');
        $this->assertSame(5, max(array_column($attempts, 'concurrent_at_arrival')), 'the window is used fully');
        // The 19 others went through the 4 remaining slots: 5 waves of ~100 ms, not 3 s.
        $fast = array_filter($attempts, fn ($a) => $a['path'] !== '/sku/slow');
        $first = min(array_column($attempts, 't_ms'));
        $lastFastEnd = max(array_column($fast, 'end_t_ms'));
        $this->assertLessThan(900.0, $lastFastEnd - $first, 'the 19 did not wait for the slow one');
        $this->assertGreaterThanOrEqual(2900.0, $elapsedMs, 'the pool returns when the slow one timed out');
    }

    public function testMixedRequestsAndIntegerKeys(): void
    {
        $key = $this->up->key('poolmix');
        $this->up->script($key, [['status' => 200, 'body' => 'ok']]);
        $this->up->script($key, [['status' => 404]], 'repeat_last', '/missing');
        $results = $this->client($key)->pool([
            10 => ['GET', '/a', ['query' => ['x' => 1]]],
            'post' => ['POST', '/b', ['json' => ['sku' => 2], 'idempotency_key' => 'k']],
            11 => ['GET', '/missing'],
        ], concurrency: 2);
        $this->assertSame([10, 'post', 11], array_keys($results));
        $this->assertSame(200, $results[10]->status());
        $this->assertSame(200, $results['post']->status());
        $this->assertSame(404, $results[11]->status());
    }

    public function testBatchRuleSkipsTheRetryRoundWhenMostFirstAttemptsFail(): void
    {
        $key = $this->up->key('poolbatch');
        $this->up->script($key, [['status' => 503]]);
        $this->up->script($key, [['status' => 200]], 'repeat_last', '/ok');
        $requests = [];
        for ($i = 0; $i < 10; $i++) {
            $requests[] = ['GET', $i < 6 ? "/bad/$i" : '/ok'];
        }
        $results = $this->client($key, ['backoff' => ['base' => 0.001, 'cap' => 0.002]])->pool($requests, 4);
        $this->assertCount(10, $this->up->attempts($key, 10), 'no retry round: exactly one attempt each');
        for ($i = 0; $i < 10; $i++) {
            if ($i < 6) {
                $this->assertInstanceOf(UpstreamFailed::class, $results[$i]);
                $this->assertSame(503, $results[$i]->getCode());
                $this->assertSame(503, $results[$i]->response()->status());
                $this->assertStringContainsString('retry skipped', $results[$i]->getMessage());
            } else {
                $this->assertSame(200, $results[$i]->status());
            }
        }
    }

    public function testFewFailuresAreRetried(): void
    {
        $key = $this->up->key('poolfew');
        $this->up->script($key, [['status' => 200]]);
        $this->up->script($key, [['status' => 503], ['status' => 200]], 'repeat_last', '/flaky');
        $requests = [['GET', '/flaky']];
        for ($i = 0; $i < 9; $i++) {
            $requests[] = ['GET', "/ok/$i"];
        }
        $results = $this->client($key, ['backoff' => ['base' => 0.001, 'cap' => 0.002]])->pool($requests, 5);
        $this->assertCount(11, $this->up->attempts($key, 11));
        $this->assertSame(2, $results[0]->attempts());
        foreach ($results as $r) {
            $this->assertNotInstanceOf(Unavailable::class, $r);
        }
    }

    public function testAPoolOfOneIsRetriedAsGetWouldBe(): void
    {
        // One first attempt shows no share: its failure is retried, as get() would retry it.
        $key = $this->up->key('poolone');
        $this->up->script($key, [['status' => 503], ['status' => 200]]);
        $results = $this->client($key, ['backoff' => ['base' => 0.001, 'cap' => 0.002]])->pool([['GET', '/flaky']]);
        $this->assertCount(2, $this->up->attempts($key, 2));
        $this->assertSame(200, $results[0]->status());
        $this->assertSame(2, $results[0]->attempts());
    }

    public function testTheDeadlineBoundsTheWholeBatch(): void
    {
        // 101 hanging items, concurrency 16, deadline 2 s once took 14 s (each wave got its own
        // 2 s). The deadline now counts from the pool's start.
        $key = $this->up->key('pooldeadline');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 30000]]);
        $client = $this->client($key, ['timeout' => 10, 'deadline' => 2.0]);
        $requests = [];
        for ($i = 0; $i < 101; $i++) {
            $requests[] = ['GET', "/h/$i"];
        }
        $t = hrtime(true);
        $results = $client->pool($requests, 16);
        $elapsedMs = (hrtime(true) - $t) / 1e6;
        $this->assertLessThan(2300.0, $elapsedMs);
        $this->assertGreaterThanOrEqual(1950.0, $elapsedMs, 'the first wave ran until the deadline');
        $neverSent = 0;
        foreach ($results as $r) {
            $this->assertInstanceOf(DeadlineExceeded::class, $r);
            $neverSent += str_contains($r->getMessage(), '(0 attempts') ? 1 : 0;
        }
        $this->assertSame(85, $neverSent, 'items not started fail at once');
        $this->assertCount(16, $this->up->attempts($key, 16, 5000, false));
    }
}
