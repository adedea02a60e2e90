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
 * A learned limit that an incident drove to its floor grows back when the upstream is healthy
 * again, also when its one caller is `pool()`: the batch's attempts start together and end one
 * after another, so as they end they see their limit half used; read so, the limit stayed at 2
 * for good (and a batch of 24 got FunnelFull for 22 of them) against a healthy upstream. Their
 * latencies over the interval's length show every slot in use.
 */
final class PoolRecoveryTest extends TestCase
{
    public function testALimitAPoolFillsGrowsBackFromTheFloor(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('pool-recovery');
        $up->script($key, [['status' => 503]]);
        $name = Run::name('pool-recovery');
        $client = new Client($name, [
            'base_url' => $up->base($key),
            'budget' => false,
            'max_attempts' => 1,
            'timeout' => 2,
            'funnel' => ['limit' => 'auto', 'min' => 1, 'max' => 32, 'initial' => 16],
        ]);
        $handle = new Funnel($name, 64);
        $batch = array_fill(0, 24, ['GET', '/x']);
        $this->waitFor(function () use ($client, $handle, $batch) {
            $client->pool($batch, 24);

            return ($handle->stats()['learned']['limit'] ?? 99.0) <= 1.0 ?: null;
        }, 20.0, 'the 503s bring the limit to its floor', 0.0);

        $up->script($key, [['status' => 200, 'delay_ms' => 20]]);
        $from = $handle->stats()['learned']['intervals'];
        // The documented recovery: from the floor to 16 within 2√16 + 1 = 9 intervals of
        // a limit in use; 20 intervals here leave room for a slow machine.
        $this->waitFor(function () use ($client, $handle, $batch, $from) {
            $client->pool($batch, 24);
            $learned = $handle->stats()['learned'];

            return $learned['intervals'] - $from >= 20 ? $learned : null;
        }, 30.0, '20 intervals of a healthy upstream', 0.0);
        $learned = $handle->stats()['learned'];
        $this->assertGreaterThanOrEqual(16.0, $learned['limit'], json_encode($learned));
    }
}
