<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;
use Resilient\UpstreamFailed;

/**
 * A learned limit keeps the slot of an attempt that timed out counted for as long again as the
 * attempt took: the upstream does not notice that its client left and still works on the
 * request, so a new attempt in its place would queue behind it. A fixed limit, and an attempt
 * that got an answer, give the slot back at once.
 */
final class AbandonedAttemptTest extends TestCase
{
    /** @return array{float, float} seconds from the call's end until the slot was free; the attempt's duration */
    private function slotFreedAfter(array $funnel): array
    {
        $up = MockUpstream::shared();
        $key = $up->key('abandoned');
        $up->script($key, [['delay_ms' => 3000]]);
        $name = Run::name('abandoned');
        $client = new Client($name, [
            'base_url' => $up->base($key),
            'timeout' => 0.3,
            'max_attempts' => 1,
            'funnel' => $funnel,
        ]);
        $began = hrtime(true);
        try {
            $client->get('/slow');
            $this->fail('the attempt must time out');
        } catch (UpstreamFailed $e) {
            $this->assertSame(0, $e->getCode(), $e->getMessage());
        }
        $ended = hrtime(true);
        $handle = new Funnel($name, 64);
        while ($handle->inFlight() > 0 && hrtime(true) - $ended < 5e9) {
            usleep(5000);
        }
        $this->assertSame(0, $handle->inFlight(), 'the slot lapses in the end');

        return [(hrtime(true) - $ended) / 1e9, ($ended - $began) / 1e9];
    }

    public function testALearnedLimitKeepsATimedOutAttemptsSlotForAsLongAgain(): void
    {
        [$held, $attempt] = $this->slotFreedAfter(['limit' => 'auto']);
        $this->assertGreaterThanOrEqual(0.29, $attempt);
        // The attempt inside the call lasted at least its 0.3 s timeout and its slot is held as
        // long again from its end, so the slot is free no sooner than 0.6 s after the call
        // began. (The call's own time around the attempt varies on a busy machine, which is
        // why the hold is not compared with $attempt alone.)
        $this->assertGreaterThanOrEqual(0.59, $attempt + $held, "held {$held} s after a call of {$attempt} s");
        $this->assertLessThan($attempt + 1.0, $held, 'and not much longer');
    }

    public function testAFixedLimitGivesTheSlotBackAtOnce(): void
    {
        [$held] = $this->slotFreedAfter(['limit' => 4]);
        $this->assertLessThan(0.05, $held);
    }
}
