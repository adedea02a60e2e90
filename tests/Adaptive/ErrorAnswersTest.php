<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * An error page comes back fast: its latency says nothing of the upstream's queue. Taken as
 * an answer, a 502 in 0.3 ms from an upstream that answers in 60 ms taught the limit a
 * no-load latency of 0.3 ms, and with it that every later answer queued. 502 and 504 (a
 * gateway's "the upstream is down / too slow") lower the limit as 503 does; other 5xx answers
 * teach it nothing. Measured on one client, one call at a time, from what `Funnel::stats()`
 * shows before and after each phase.
 */
final class ErrorAnswersTest extends TestCase
{
    /** Calls one after another for `$seconds` (intervals last 100 ms or more). */
    private function callFor(Client $client, float $seconds): void
    {
        $until = microtime(true) + $seconds;
        while (microtime(true) < $until) {
            try {
                $client->get('/x');
            } catch (\Resilient\Unavailable) {
            }
        }
    }

    /** A client on a fresh name whose limit learned a healthy upstream (60 ms) first. */
    private function learnedHealthy(MockUpstream $up, string $tag): array
    {
        $key = $up->key($tag);
        $name = Run::name($tag);
        $client = new Client($name, [
            'base_url' => $up->base($key),
            'max_attempts' => 1,
            'budget' => false,
            'circuit' => false,
            'funnel' => ['limit' => 'auto', 'initial' => 4, 'max' => 16],
        ]);
        $learned = fn (): array => (new Funnel($name, 16))->stats()['learned'];
        $up->script($key, [['delay_ms' => 60]]);
        $this->callFor($client, 0.8);
        $this->assertGreaterThanOrEqual(55.0, $learned()['no_load_rtt_ms'], json_encode($learned()));
        $this->assertGreaterThan(1.0, $learned()['limit']);

        return [$client, $key, $learned];
    }

    public function testGatewayErrorsLowerTheLimitAndTeachNoLatency(): void
    {
        $up = MockUpstream::shared();
        foreach ([502, 504] as $status) {
            [$client, $key, $learned] = $this->learnedHealthy($up, "ao-$status");
            $before = $learned();
            $up->script($key, [['status' => $status]]);
            $this->callFor($client, 0.5);
            $after = $learned();
            $this->assertGreaterThan($before['intervals'], $after['intervals'], "$status: intervals closed");
            // (The interval that the first error answers end may hold answers of before.)
            $this->assertGreaterThan(0.9 * $before['no_load_rtt_ms'], $after['no_load_rtt_ms'], "$status: " . json_encode($after));
            $this->assertLessThan($before['limit'], $after['limit'], "$status lowers the limit as 503 does");
        }
    }

    public function testOtherServerErrorsTeachTheLimitNothing(): void
    {
        $up = MockUpstream::shared();
        [$client, $key, $learned] = $this->learnedHealthy($up, 'ao-5xx');
        foreach ([500, 501, 505] as $status) {
            $up->script($key, [['status' => $status]]);
            $before = $learned();
            $this->callFor($client, 0.5);
            $this->assertSame($before, $learned(), "$status: nothing learned");
        }
    }
}
