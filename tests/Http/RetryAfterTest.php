<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\DeadlineExceeded;
use Resilient\UpstreamFailed;

/**
 * Must show 1, 2 and the Retry-After half of 11: the server's Retry-After is obeyed and never
 * shortened (delta-seconds and HTTP-date), a wait longer than the deadline's remainder or
 * max_retry_after fails at once, and absurd values are handled safely. Times are the upstream's.
 */
final class RetryAfterTest extends HttpTestCase
{
    /** Seed 004's exercise: 429 + Retry-After: 2 twice, then 200. */
    public function testRetryAfterSecondsIsObeyedExactly(): void
    {
        $key = $this->up->key('ra');
        $this->up->script($key, [
            ['status' => 429, 'headers' => ['Retry-After' => '2']],
            ['status' => 429, 'headers' => ['Retry-After' => '2']],
            ['status' => 200, 'json' => ['answer' => 'summary']],
        ]);
        $records = [];
        $client = $this->client($key, ['on_attempt' => function (array $a) use (&$records): void {
            $records[] = $a;
        }]);
        $r = $client->post('/v1/chat', ['prompt' => 'x'], ['idempotency_key' => 'job-1']);

        $this->assertSame(200, $r->status());
        $this->assertSame(3, $r->attempts());
        $this->assertSame(['answer' => 'summary'], $r->json());
        $attempts = $this->up->attempts($key, 3);
        $this->assertCount(3, $attempts);
        foreach (self::gapsMs($attempts) as $gap) {
            $this->assertGreaterThanOrEqual(2000.0, $gap, 'the wait must never be shorter than Retry-After');
            $this->assertLessThan(2300.0, $gap, 'the wait is Retry-After, not more');
        }
        $this->assertGreaterThanOrEqual(4000.0, $r->elapsedMs());
        $this->assertSame([true, true, false], array_column($records, 'retry_follows'));
        $this->assertSame([429, 429, 200], array_column($records, 'status'));
        $this->assertStringContainsString('Retry-After 2s', $records[0]['reason']);
    }

    /** The same exercise with HTTP-dates: twice, then 200. */
    public function testRetryAfterAsAnHttpDateIsObeyed(): void
    {
        $key = $this->up->key('radate');
        $first = time() + 2;
        $second = $first + 2;
        $date = fn (int $t) => gmdate('D, d M Y H:i:s', $t) . ' GMT';
        $this->up->script($key, [
            ['status' => 503, 'headers' => ['Retry-After' => $date($first)]],
            ['status' => 429, 'headers' => ['Retry-After' => $date($second)]],
            ['status' => 200, 'body' => 'ok'],
        ]);
        $r = $this->client($key)->get('/x');
        $this->assertSame('ok', $r->body());
        $this->assertSame(3, $r->attempts());
        $attempts = $this->up->attempts($key, 3);
        // Each retry arrives at or after the date the server named (same host clock), not later
        // than a scheduling delay after it.
        foreach ([1 => $first, 2 => $second] as $i => $at) {
            $this->assertGreaterThanOrEqual($at * 1000.0 - 2.0, $attempts[$i]['unix_ms'], "retry $i came before the date");
            $this->assertLessThan($at * 1000.0 + 300.0, $attempts[$i]['unix_ms'], "retry $i came late");
        }
        $this->assertGreaterThan(900.0, self::gapsMs($attempts)[0]);
        $this->assertGreaterThan(1900.0, self::gapsMs($attempts)[1]);
    }

    /** Must show 2: a Retry-After longer than what is left of the deadline fails at once. */
    public function testRetryAfterBeyondTheDeadlineFailsAtOnce(): void
    {
        $key = $this->up->key('radeadline');
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => '5'], 'body' => 'come back later']]);
        $t = hrtime(true);
        try {
            $this->client($key, ['deadline' => 2.0])->get('/x');
            $this->fail('expected DeadlineExceeded');
        } catch (DeadlineExceeded $e) {
            $elapsedMs = (hrtime(true) - $t) / 1e6;
            $this->assertLessThan(1000.0, $elapsedMs, 'must not sleep towards a wait it cannot finish (2 s left)');
            $this->assertSame(503, $e->getCode());
            $this->assertSame('come back later', $e->response()->body());
            $this->assertStringContainsString('Retry-After 5s', $e->getMessage());
        }
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    public function testTheEnclosingDeadlineCountsToo(): void
    {
        $key = $this->up->key('raenclosing');
        $this->up->script($key, [['status' => 429, 'headers' => ['Retry-After' => '3']]]);
        $client = $this->client($key, ['deadline' => 30.0]);
        $t = hrtime(true);
        $this->expectException(DeadlineExceeded::class);
        try {
            \Resilient\Deadline::within(1.0, fn () => $client->get('/x'));
        } finally {
            $this->assertLessThan(700.0, (hrtime(true) - $t) / 1e6, 'no sleep towards the 1 s deadline');
        }
    }

    public function testRetryAfterBeyondMaxRetryAfterFailsAtOnceAsUpstreamFailed(): void
    {
        $key = $this->up->key('ramax');
        $this->up->script($key, [['status' => 429, 'headers' => ['Retry-After' => '60']]]);
        $t = hrtime(true);
        try {
            $this->client($key, ['max_retry_after' => 10])->get('/x');
            $this->fail('expected UpstreamFailed');
        } catch (UpstreamFailed $e) {
            $this->assertLessThan(1000.0, (hrtime(true) - $t) / 1e6, 'no sleep of 10 s or 60 s');
            $this->assertSame(429, $e->getCode());
            $this->assertStringContainsString('max_retry_after', $e->getMessage());
        }
    }

    /** Must show 11 (Retry-After): absurd values never panic and never shorten a real wait. */
    public function testAbsurdRetryAfterValuesAreHandledSafely(): void
    {
        // "-1", "abc", "1.5": no hint, the backoff applies (short waits), then the answer.
        foreach (['-1', 'abc', '1.5', '   ', '2 s', '+3'] as $i => $value) {
            $key = $this->up->key("raabsurd$i");
            $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => $value]], ['status' => 200]]);
            $r = $this->client($key, ['backoff' => ['base' => 0.01, 'cap' => 0.05]])->get('/x');
            $this->assertSame(2, $r->attempts(), var_export($value, true));
            $this->assertLessThan(500.0, $r->elapsedMs(), var_export($value, true));
        }
        // 10^12 seconds: far beyond any limit, fails at once.
        $key = $this->up->key('rahuge');
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => '1000000000000']]]);
        try {
            $this->client($key)->get('/x');
            $this->fail('expected UpstreamFailed');
        } catch (UpstreamFailed $e) {
            $this->assertSame(1, count($this->up->attempts($key, 1)));
        }
        // A date in 1970 is in the past, and `Retry-After: 0` asks for no wait: the jittered
        // backoff still applies, never a retry at once.
        foreach (['Thu, 01 Jan 1970 00:00:00 GMT', '0'] as $i => $value) {
            $key = $this->up->key("rapast$i");
            $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => $value]], ['status' => 200]]);
            $reasons = [];
            $r = $this->client($key, [
                'backoff' => ['base' => 0.3, 'cap' => 0.3],
                'on_attempt' => function (array $a) use (&$reasons): void {
                    $reasons[] = $a['reason'];
                },
            ])->get('/x');
            $this->assertSame(2, $r->attempts());
            $this->assertMatchesRegularExpression('/retry after backoff (\d+)(ms|µs) \(Retry-After 0µs is shorter\)/', $reasons[0]);
            $waitMs = self::backoffMs($reasons[0]);
            $gap = self::gapsMs($this->up->attempts($key, 2))[0];
            $this->assertGreaterThanOrEqual($waitMs - 2.0, $gap, "$value: waited the backoff");
            $this->assertLessThan($waitMs + 150.0, $gap, $value);
        }
    }
}
