<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\FunnelFull;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * Must show 6: the funnel slot is taken per attempt and released before any sleep. Process A
 * (a CLI child) calls through a funnel of one slot and gets 503 + Retry-After: 1; while A sleeps
 * between its attempts, this process (B) takes the same funnel's only slot and is served. The
 * upstream sees B's request between A's two attempts. And while A is *inside* an attempt, B is
 * refused at once (FunnelFull): the slot really is held per attempt.
 */
final class FunnelReleaseTest extends HttpTestCase
{
    private function startA(string $funnel, string $key): PhpProcess
    {
        $spec = [
            'name' => $funnel,
            'options' => ['base_url' => $this->up->base($key), 'funnel' => ['limit' => 1], 'budget' => false],
            'path' => '/a',
        ];
        return PhpProcess::script(__DIR__ . '/fixtures/call.php', [base64_encode(json_encode($spec))]);
    }

    public function testTheSlotIsFreeWhileACallSleepsBetweenAttempts(): void
    {
        $funnel = Run::name('funnel');
        $keyA = $this->up->key('fa');
        $keyB = $this->up->key('fb');
        $this->up->script($keyA, [['status' => 503, 'headers' => ['Retry-After' => '1']], ['status' => 200, 'body' => 'A']]);
        $this->up->script($keyB, [['status' => 200, 'body' => 'B']]);
        $a = $this->startA($funnel, $keyA);
        $this->up->attempts($keyA, 1); // A's first attempt has been answered: A now sleeps ~1 s
        // A gives its slot back before it sleeps: well before its retry, 1 s after the answer.
        $this->waitFor(fn () => (new \Resilient\Funnel($funnel, 1))->inFlight() === 0, 0.8, 'A to give its slot back before sleeping', 0.005);

        $b = new \Resilient\Client($funnel, ['base_url' => $this->up->base($keyB), 'funnel' => ['limit' => 1], 'budget' => false]);
        $this->assertSame('B', $b->get('/b')->body(), 'B must get the slot A released before sleeping');

        $outA = $a->wait(10.0)->json();
        $this->assertTrue($outA['results'][0]['ok'], json_encode($outA));
        $this->assertSame(2, $outA['results'][0]['attempts']);
        $ta = array_column($this->up->attempts($keyA, 2), 't_ms');
        $tb = $this->up->attempts($keyB, 1)[0]['t_ms'];
        $this->assertGreaterThan($ta[0], $tb);
        $this->assertLessThan($ta[1], $tb, 'B was served between A\'s attempts');
    }

    /** A client's FunnelFull says why in numbers, as Funnel::acquire()'s refusal does. */
    public function testAFullFunnelSaysWhyInNumbers(): void
    {
        $name = Run::name('funnel');
        $key = $this->up->key('fwhy');
        $this->up->script($key, [['status' => 200]]);
        $held = (new \Resilient\Funnel($name, 2, 1))->tryAcquire();
        $this->assertNotNull($held, 'a console caller may take one of the two');
        $client = new \Resilient\Client($name, ['base_url' => $this->up->base($key), 'funnel' => ['limit' => 2, 'reserve' => 1], 'budget' => false]);
        try {
            $client->get('/x');
            $this->fail('expected FunnelFull');
        } catch (FunnelFull $e) {
            $this->assertStringContainsString(
                'funnel full: no free slot for attempt 1, not sent (1 of 2 slots in flight; background callers may hold 1, the rest is kept for web callers)',
                $e->getMessage(),
            );
        } finally {
            $held->release();
        }
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');
    }

    public function testTheSlotIsHeldDuringAnAttempt(): void
    {
        $funnel = Run::name('funnel');
        $keyA = $this->up->key('fa');
        $keyB = $this->up->key('fb');
        $this->up->script($keyA, [['status' => 200, 'delay_ms' => 1500, 'body' => 'A']]);
        $this->up->script($keyB, [['status' => 200]]);
        $a = $this->startA($funnel, $keyA);
        $this->up->attempts($keyA, 1, 5000, false); // A's attempt has arrived and is in progress

        $b = new \Resilient\Client($funnel, ['base_url' => $this->up->base($keyB), 'funnel' => ['limit' => 1], 'budget' => false]);
        $t = hrtime(true);
        try {
            $b->get('/b');
            $this->fail('expected FunnelFull while A holds the only slot');
        } catch (FunnelFull $e) {
            $this->assertLessThan(500.0, (hrtime(true) - $t) / 1e6, 'a full funnel fails fast (A holds its slot 1.5 s)');
            $this->assertSame(0, $e->getCode());
            // No `funnel.wait`: nothing waited (it said "after waiting 4µs", the time the
            // admission took).
            $this->assertStringContainsString('funnel full: no free slot for attempt 1, not sent', $e->getMessage());
        }
        $this->assertSame([], $this->up->attempts($keyB), 'nothing was sent');
        $this->assertTrue($a->wait(10.0)->json()['results'][0]['ok']);
    }
}
