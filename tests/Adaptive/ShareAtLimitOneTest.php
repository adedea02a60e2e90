<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;
use Resilient\Unavailable;

/**
 * A queue worker's host (console callers only, `share` as the web's config has it) after an
 * outage took the learned limit to 1. A refused caller sends nothing and teaches nothing, so
 * were the one slot kept for web callers, every job would fail from then on, the upstream
 * healthy or not. They take it when it is free, and their answers raise the limit again.
 */
final class ShareAtLimitOneTest extends TestCase
{
    public function testBackgroundCallersAloneGetTheOneSlotAndRaiseTheLimit(): void
    {
        $up = MockUpstream::shared();
        $down = $up->key('share-one-down');
        $up->script($down, [['status' => 503]]);
        $healthy = $up->key('share-one-up');
        $up->script($healthy, [['delay_ms' => 20]]);
        $name = Run::name('share-one');
        $client = fn (string $key) => new Client($name, [
            'base_url' => $up->base($key),
            'context' => 'console',
            'max_attempts' => 1,
            'budget' => false,
            'funnel' => ['limit' => 'auto', 'max' => 32, 'initial' => 8, 'reserve' => 2, 'share' => true],
        ]);
        $handle = new Funnel($name, 64);

        $outage = $client($down);
        $until = microtime(true) + 5.0;
        while (($handle->stats()['learned']['limit'] ?? 8.0) > 1.0 && microtime(true) < $until) {
            try {
                $outage->get('/x');
            } catch (Unavailable $e) {
                // 503, then the funnel full under the falling limit
            }
            usleep(5_000);
        }
        $this->assertSame(1.0, (float) $handle->stats()['learned']['limit'], 'the 503s took it to its floor');

        $jobs = $client($healthy);
        $outcomes = [];
        for ($i = 0; $i < 60; $i++) {
            try {
                $key = 's' . $jobs->get('/x')->status();
            } catch (Unavailable $e) {
                $key = (new \ReflectionClass($e))->getShortName();
            }
            $outcomes[$key] = ($outcomes[$key] ?? 0) + 1;
            usleep(5_000);
        }
        $learned = $handle->stats()['learned'];
        $this->assertSame(60, $outcomes['s200'] ?? 0, json_encode([$outcomes, $learned]));
        $this->assertGreaterThanOrEqual(2.0, $learned['limit'], json_encode($learned));
    }
}
