<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\DeadlineExceeded;

/**
 * Must show 5: a hanging upstream (reads the request, never answers) with deadline 0.5 s: the
 * call ends within deadline + 100 ms, whatever `timeout` says.
 */
final class HangTest extends HttpTestCase
{
    public function testAHangingUpstreamIsCutAtTheDeadline(): void
    {
        $key = $this->up->key('hang');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20000]]);
        $records = [];
        $client = $this->client($key, ['deadline' => 0.5, 'timeout' => 10, 'connect_timeout' => 3, 'on_attempt' => function (array $a) use (&$records): void {
            $records[] = $a;
        }]);
        $t = hrtime(true);
        try {
            $client->get('/slow');
            $this->fail('expected DeadlineExceeded');
        } catch (DeadlineExceeded $e) {
            $elapsedMs = (hrtime(true) - $t) / 1e6;
            // At the deadline, not at the 3 s connect or the 10 s timeout (the upper bound only
            // catches that: a loaded machine may pause the process a while).
            $this->assertLessThan(1500.0, $elapsedMs);
            $this->assertGreaterThanOrEqual(495.0, $elapsedMs);
            $this->assertSame(0, $e->getCode());
            $this->assertNull($e->response());
        }
        $this->assertCount(1, $records);
        $this->assertSame('timeout', $records[0]['error']);
        $this->assertNull($records[0]['status']);
        $this->assertFalse($records[0]['retry_follows']);
    }

    /**
     * The deadline ending the only attempt (one allowed, as a web request's cap makes it, or a
     * POST without key) is DeadlineExceeded, as when it leaves no time for a retry: the same
     * deadline gives the same exception whatever max_attempts says.
     */
    public function testTheDeadlineEndingTheOnlyAttemptIsDeadlineExceeded(): void
    {
        $key = $this->up->key('hang-only');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20000]]);
        $client = $this->client($key, ['deadline' => 0.3, 'timeout' => 10, 'max_attempts' => 1]);
        foreach (['GET', 'POST'] as $method) {
            try {
                $client->request($method, '/slow');
                $this->fail("$method: expected DeadlineExceeded");
            } catch (DeadlineExceeded $e) {
                $this->assertStringContainsString('deadline exceeded: the deadline ended the attempt (1 attempt in', $e->getMessage());
                $this->assertNull($e->response());
            }
        }
        $this->assertCount(2, $this->up->attempts($key, 2), 'each was sent');
    }

    /**
     * A request's timeout longer than the funnel's lease is cut to the lease (an attempt never
     * outlives its slot): the failure says so, naming the option that would allow more.
     */
    public function testATimeoutCutToTheFunnelsLeaseSaysSo(): void
    {
        $key = $this->up->key('hang-lease');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20000]]);
        $client = $this->client($key, ['timeout' => 0.1, 'max_attempts' => 1, 'funnel' => ['limit' => 2]]);
        try {
            $client->get('/slow', null, ['timeout' => 5]);
            $this->fail('expected UpstreamFailed');
        } catch (\Resilient\UpstreamFailed $e) {
            // 2 × the client's timeout, less the admission's own time.
            $this->assertMatchesRegularExpression(
                "/\\[timeout error: the attempt timed out after (1\\d\\d|200)ms, cut to the funnel's lease \\(option 'funnel\\.lease'\\)\\]$/",
                $e->getMessage(),
            );
        }
        // Cut by the deadline or its own timeout, the message is as before.
        try {
            $client->get('/slow');
            $this->fail('expected UpstreamFailed');
        } catch (\Resilient\UpstreamFailed $e) {
            $this->assertStringEndsWith('[timeout error: the attempt timed out]', $e->getMessage());
        }
    }

    public function testEachAttemptGetsOnlyTheRemainder(): void
    {
        // The seed's deadline (850 ms) and 3 attempts, with 600 ms per attempt instead of its
        // 300: then an attempt given its whole timeout past the remainder ends the call at
        // 1.2 s or later, far from the 850 ms of a correct one (with 300 ms the two differ by
        // about 50 ms, which a loaded machine's stall can hide).
        $key = $this->up->key('hang3');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20000]]);
        $records = [];
        $client = $this->client($key, ['deadline' => 0.85, 'timeout' => 0.6, 'max_attempts' => 3, 'on_attempt' => function (array $a) use (&$records): void {
            $records[] = $a;
        }]);
        $t = hrtime(true);
        try {
            $client->get('/slow');
            $this->fail('expected an Unavailable');
        } catch (\Resilient\Unavailable $e) {
            $this->assertLessThan(1100.0, (hrtime(true) - $t) / 1e6);
        }
        $durations = array_column($records, 'duration_ms');
        $this->assertCount(2, $durations, 'a second attempt in the 250 ms left, no third');
        // The first attempt got its whole 600 ms timeout (a stall may add to it, never cut it);
        // the second only what was left of the deadline.
        $this->assertGreaterThanOrEqual(590.0, $durations[0]);
        $this->assertLessThan(500.0, $durations[1]);
    }

    public function testAClosedConnectionIsRetried(): void
    {
        $key = $this->up->key('close');
        $this->up->script($key, [['close' => true], ['status' => 200, 'body' => 'ok']]);
        $records = [];
        $r = $this->client($key, ['on_attempt' => function (array $a) use (&$records): void {
            $records[] = $a;
        }])->get('/x');
        $this->assertSame('ok', $r->body());
        $this->assertSame(['closed', null], array_column($records, 'error'));
    }

    public function testAClientDeadlineUnderFiftyMillisecondsStillSends(): void
    {
        // A cache next door, told to answer within 30 ms: the upstream sees the attempt. Before,
        // every call failed at once: "less than a useful attempt (50ms)".
        // (Whether the answer comes within the 30 ms is the machine's business: the attempt is
        // what is asserted.)
        $key = $this->up->key('shortdeadline');
        $this->up->script($key, [['status' => 200, 'body' => 'hit']]);
        try {
            $this->assertSame('hit', $this->client($key, ['deadline' => 0.03, 'timeout' => 1])->get('/cache')->body());
        } catch (DeadlineExceeded $e) {
            $this->assertStringNotContainsString('less than a useful attempt', $e->getMessage());
        }
        $this->assertNotEmpty($this->up->attempts($key, 1));
    }
}
