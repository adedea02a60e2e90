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
 * A timeout shorter than the upstream takes without a queue (a caller whose deadline was
 * nearly spent) says nothing of the upstream's load: it leaves the learned limit, which every
 * caller of the host shares, where it was. A timeout the upstream had time to avoid lowers it.
 */
final class CutShortTimeoutTest extends TestCase
{
    public function testTimeoutsShorterThanTheIdleLatencyLeaveTheLearnedLimitAlone(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('cut-short');
        $up->script($key, [['delay_ms' => 40]]);
        $name = Run::name('cut-short');
        $client = new Client($name, [
            'base_url' => $up->base($key),
            'timeout' => 2,
            'max_attempts' => 1,
            // A timed-out attempt's slot stays held as long again (rule 5): the next caller waits.
            'funnel' => ['limit' => 'auto', 'min' => 1, 'max' => 16, 'initial' => 4, 'wait' => 0.1],
        ]);
        $handle = new Funnel($name, 64);
        for ($i = 0; $i < 30; $i++) {
            $this->assertSame(200, $client->get('/x')->status());
        }
        $learned = $handle->stats()['learned'];
        $this->assertGreaterThan(0, $learned['intervals'], 'intervals closed while answers came in 40 ms');
        $this->assertGreaterThanOrEqual(40.0, $learned['no_load_rtt_ms']);

        // 40 callers with 10 ms left, each cut short: no drop, no latency.
        $cut = 0;
        for ($i = 0; $i < 40; $i++) {
            try {
                $client->get('/x', null, ['timeout' => 0.01]);
            } catch (Unavailable $e) {
                $this->assertSame('timeout', $e->failure(), $e->getMessage());
                $cut++;
            }
        }
        $this->assertSame(40, $cut, 'each attempt timed out');
        $after = $handle->stats()['learned'];
        $this->assertSame($learned['limit'], $after['limit'], 'the limit did not move');
        $this->assertSame($learned['intervals'], $after['intervals'], 'no interval was closed by them');

        // Timeouts after 150 ms (over 3 × the idle latency): drops, the limit falls.
        $up->script($key, [['delay_ms' => 1000]]);
        for ($i = 0; $i < 6; $i++) {
            try {
                $client->get('/x', null, ['timeout' => 0.15]);
            } catch (Unavailable $e) {
                // a timeout, or the funnel full once the limit fell under the held slots
            }
        }
        $fallen = $handle->stats()['learned'];
        $this->assertLessThanOrEqual(0.9 * $learned['limit'], $fallen['limit'], json_encode([$learned, $fallen]));
    }
}
