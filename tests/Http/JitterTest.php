<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

/**
 * Must show 3: 500/503 without Retry-After → the waits between attempts differ, and each lies
 * within its full-jitter bound U(0, min(cap, base·2^(n-1))). Measured at the upstream.
 */
final class JitterTest extends HttpTestCase
{
    public function testWaitsAreFullJitterWithinTheirBounds(): void
    {
        $base = 0.05;
        $cap = 0.4;
        $allWaits = [];
        $fractions = [];
        for ($call = 0; $call < 3; $call++) {
            $key = $this->up->key('jitter');
            $this->up->script($key, [['status' => 500], ['status' => 503], ['status' => 500], ['status' => 503], ['status' => 200]]);
            $client = $this->client($key, ['retry_on' => [500, 503], 'max_attempts' => 5, 'backoff' => ['base' => $base, 'cap' => $cap]]);
            $this->assertSame(5, $client->get('/x')->attempts());
            $attempts = $this->up->attempts($key, 5);
            foreach (self::gapsMs($attempts) as $i => $gap) {
                // The gap is the previous attempt's duration plus the wait.
                $wait = $gap - ($attempts[$i]['duration_ms'] ?? 0.0);
                $bound = min($cap, $base * 2 ** $i) * 1000.0;
                $this->assertLessThanOrEqual($bound + 25.0, $wait, "retry " . ($i + 1) . " waited {$wait} ms, bound {$bound} ms");
                $this->assertGreaterThanOrEqual(0.0, $wait);
                $allWaits[] = round($wait, 1);
                $fractions[] = $wait / $bound;
            }
        }
        // 12 waits from continuous distributions: (almost) all different.
        $this->assertGreaterThanOrEqual(10, count(array_unique($allWaits)), 'waits must differ: ' . json_encode($allWaits));
        // Full jitter spreads over the whole range: plain (or equal-jitter) exponential backoff
        // would put every wait at or above half its bound. U(0, bound) puts a wait in the lower
        // half with probability 1/2, so 12 waits all in the upper half happen 1 time in 4096.
        $this->assertNotEmpty(array_filter($fractions, fn ($f) => $f < 0.5), 'some waits must fall in the lower half of their bound: ' . json_encode($fractions));
    }
}
