<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

/**
 * Must show 3: 500/503 without Retry-After → the waits between attempts differ, and each lies
 * within its full-jitter bound U(0, min(cap, base·2^(n-1))). Each wait drawn is read from the
 * attempt's `on_attempt` reason and held against its bound exactly; the upstream measures that
 * it was waited (the gap between two attempts, less the first one's duration, is never shorter,
 * and longer only by a bound that only catches a wait gone wrong: a loaded machine may pause
 * the process for tens of milliseconds after the wait ended).
 */
final class JitterTest extends HttpTestCase
{
    public function testWaitsAreFullJitterWithinTheirBounds(): void
    {
        $base = 0.05;
        $cap = 0.4;
        $allWaits = [];
        $fractions = [];
        $overshoots = [];
        for ($call = 0; $call < 3; $call++) {
            $key = $this->up->key('jitter');
            $this->up->script($key, [['status' => 500], ['status' => 503], ['status' => 500], ['status' => 503], ['status' => 200]]);
            $drawn = [];
            $client = $this->client($key, [
                'retry_on' => [500, 503], 'max_attempts' => 5, 'backoff' => ['base' => $base, 'cap' => $cap],
                'on_attempt' => function (array $a) use (&$drawn): void {
                    if (($ms = self::backoffMs($a['reason'])) !== null) {
                        $drawn[] = $ms;
                    }
                },
            ]);
            $this->assertSame(5, $client->get('/x')->attempts());
            $this->assertCount(4, $drawn, 'every retry says its backoff');
            $attempts = $this->up->attempts($key, 5);
            foreach (self::gapsMs($attempts) as $i => $gap) {
                $bound = min($cap, $base * 2 ** $i) * 1000.0;
                $this->assertLessThanOrEqual($bound, $drawn[$i], "retry " . ($i + 1) . " drew {$drawn[$i]} ms, bound {$bound} ms");
                // The gap is the previous attempt's duration plus the wait (the drawn wait is
                // shown rounded down to the millisecond).
                $wait = $gap - ($attempts[$i]['duration_ms'] ?? 0.0);
                $this->assertGreaterThanOrEqual($drawn[$i] - 2.0, $wait, "retry " . ($i + 1) . ": the upstream saw the wait drawn");
                $this->assertLessThan($drawn[$i] + 250.0, $wait, "retry " . ($i + 1) . ": waited {$wait} ms for a backoff of {$drawn[$i]} ms");
                $allWaits[] = round($wait, 1);
                $fractions[] = $drawn[$i] / $bound;
                $overshoots[] = round($wait - $drawn[$i], 1);
            }
        }
        // The draw is what was slept: most waits within 25 ms of it (a pause of the machine may
        // lengthen one or two; sleeping the bound, or twice the draw, misses by far more).
        $close = array_filter($overshoots, fn ($o) => $o <= 25.0);
        $this->assertGreaterThanOrEqual(10, count($close), 'waits beyond their draw (ms): ' . json_encode($overshoots));
        // 12 waits from continuous distributions: (almost) all different.
        $this->assertGreaterThanOrEqual(10, count(array_unique($allWaits)), 'waits must differ: ' . json_encode($allWaits));
        // Full jitter spreads over the whole range: plain (or equal-jitter) exponential backoff
        // would put every wait at or above half its bound. U(0, bound) puts a wait in the lower
        // half with probability 1/2, so 12 waits all in the upper half happen 1 time in 4096.
        $this->assertNotEmpty(array_filter($fractions, fn ($f) => $f < 0.5), 'some waits must fall in the lower half of their bound: ' . json_encode($fractions));
    }
}
