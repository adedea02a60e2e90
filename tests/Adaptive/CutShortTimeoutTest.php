<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Deadline;
use Resilient\Funnel;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;
use Resilient\Unavailable;

/**
 * A timeout the call's deadline made shorter than the upstream takes without a queue (a page
 * that spent its budget elsewhere) says nothing of the upstream's load: it leaves the learned
 * limit, which every caller of the host shares, where it was. The attempt's own timeout (the
 * client's, a request's) is the caller's word on what is too slow: a drop, however short.
 */
final class CutShortTimeoutTest extends TestCase
{
    /**
     * A client of a learned limit (initial 4, 1..16) and a handle on its funnel. A timed-out
     * attempt's slot stays held as long again (rule 5): the next caller waits up to 0.2 s.
     *
     * @return array{Client, Funnel}
     */
    private static function learning(string $name, string $baseUrl): array
    {
        $client = new Client($name, [
            'base_url' => $baseUrl,
            'timeout' => 2,
            'max_attempts' => 1,
            'funnel' => ['limit' => 'auto', 'min' => 1, 'max' => 16, 'initial' => 4, 'wait' => 0.2],
        ]);

        return [$client, new Funnel($name, 64)];
    }

    public function testTimeoutsTheDeadlineCutShortLeaveTheLearnedLimitAlone(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('cut-short');
        $up->script($key, [['delay_ms' => 100]]);
        $name = Run::name('cut-short');
        [$client, $handle] = self::learning($name, $up->base($key));
        for ($i = 0; $i < 25; $i++) {
            $this->assertSame(200, $client->get('/x')->status());
        }
        $learned = $handle->stats()['learned'];
        $this->assertGreaterThan(0, $learned['intervals'], 'intervals closed while answers came in 100 ms');
        $this->assertGreaterThanOrEqual(100.0, $learned['no_load_rtt_ms']);

        // 30 pages with 60 ms left for the call: each attempt is cut after 60 ms.
        $cut = 0;
        for ($i = 0; $i < 30; $i++) {
            try {
                Deadline::within(0.06, fn () => $client->get('/x'));
            } catch (Unavailable $e) {
                $this->assertSame('timeout', $e->failure(), $e->getMessage());
                $cut++;
            }
        }
        $this->assertSame(30, $cut, 'each attempt timed out');
        $after = $handle->stats()['learned'];
        $this->assertSame($learned['limit'], $after['limit'], 'the limit did not move');
        $this->assertSame($learned['intervals'], $after['intervals'], 'no interval was closed by them');

        // The same 60 ms as the requests' own timeout: drops, the limit falls.
        for ($i = 0; $i < 8; $i++) {
            try {
                $client->get('/x', null, ['timeout' => 0.06]);
            } catch (Unavailable $e) {
                // a timeout, or the funnel full once the limit fell under the held slots
            }
        }
        $fallen = $handle->stats()['learned'];
        $this->assertLessThanOrEqual(0.9 * $learned['limit'], $fallen['limit'], json_encode([$learned, $fallen]));
    }

    /**
     * On a fresh name nothing tells a timeout the deadline made from one an idle upstream would
     * make too: pages with tight deadlines teach nothing until answers taught the no-load
     * latency (before, they took the limit to its floor before any answer came).
     */
    public function testBeforeAnyAnswerTheDeadlinesTimeoutsTeachNothing(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('cut-short-cold');
        $up->script($key, [['delay_ms' => 100]]);
        $name = Run::name('cut-short-cold');
        [$client, $handle] = self::learning($name, $up->base($key));
        for ($i = 0; $i < 30; $i++) {
            try {
                Deadline::within(0.06, fn () => $client->get('/x'));
                $this->fail('answered in 60 ms');
            } catch (Unavailable $e) {
                $this->assertSame('timeout', $e->failure(), $e->getMessage());
            }
        }
        $this->assertNull($handle->stats()['learned'], 'nothing learnt, the limit still the initial 4');
        for ($i = 0; $i < 10; $i++) {
            $this->assertSame(200, $client->get('/x')->status());
        }
        $learned = $handle->stats()['learned'];
        $this->assertGreaterThanOrEqual(100.0, $learned['no_load_rtt_ms'], json_encode($learned));
        // One caller at a time: the limit comes down toward its use, not under 1 / 0.8 + 1.
        $this->assertGreaterThanOrEqual(2.25, $learned['limit'], json_encode($learned));
    }
}
