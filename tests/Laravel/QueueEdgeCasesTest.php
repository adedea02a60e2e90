<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use GuzzleHttp\Psr7\Response as PsrResponse;
use Illuminate\Http\Client\RequestException;
use Illuminate\Http\Client\Response;
use Resilient\BudgetExhausted;
use Resilient\DeadlineExceeded;
use Resilient\Laravel\Queue\ReleaseDelay;
use Resilient\Laravel\Queue\ReleaseWhenUnavailable;
use Resilient\Laravel\Queue\RetryAfter;
use Resilient\Laravel\Queue\WithinDeadline;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * The job middleware on values a worker meets rarely: an absurd Retry-After, a margin that would
 * put the deadline past the job's timeout, a worker PHP without the extension. Run in this
 * process on hand-made jobs; QueueTest runs the middleware under a real worker.
 */
final class QueueEdgeCasesTest extends PackageTestCase
{
    /**
     * A Retry-After longer than 11 hours releases the job for 9.9 to 11 hours, spread (Amazon
     * SQS's release, ChangeMessageVisibility, takes at most 12 hours counted from when the
     * worker received the job, an hour of which is left for the job's run: a longer delay threw
     * there;
     * before that, a number past PHP's integers came out negative or wrapped:
     * `9223372036854775807` released the job with -9223372036854775808 s).
     */
    public function testAHugeRetryAfterReleasesTheJobForAtMostElevenHours(): void
    {
        $this->boot([]);
        $job = new class () {
            public array $released = [];

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        $middleware = new ReleaseWhenUnavailable(3, 5);
        $bound = $this->logicalAnd($this->greaterThanOrEqual(39600 - 3960), $this->lessThanOrEqual(39600));
        $afters = ['9223372036854775807', '99999999999999999999', str_repeat('9', 400), '86400', '1000000', '43200', '39601'];
        foreach ($afters as $after) {
            $middleware->handle($job, fn () => throw new RequestException(new Response(new PsrResponse(429, ['Retry-After' => $after]))));
            $this->assertThat(end($job->released), $bound, substr($after, 0, 30));
        }
        // An HTTP-date far ahead, as an UpstreamFailed's last response carries it (same reading).
        $far = ReleaseDelay::afterRetryAfter(RetryAfter::parse('Fri, 31 Dec 9999 23:59:59 GMT', microtime(true)));
        $this->assertThat($far, $bound);
        $this->assertThat(ReleaseDelay::afterRetryAfter(INF), $bound);
        // Below the bound nothing changes: no sooner than asked, up to a tenth more, never past it.
        $this->assertThat(ReleaseDelay::afterRetryAfter(40.0), $this->logicalAnd($this->greaterThanOrEqual(40), $this->lessThanOrEqual(44)));
        $this->assertThat(ReleaseDelay::afterRetryAfter(39000.0), $this->logicalAnd($this->greaterThanOrEqual(39000), $this->lessThanOrEqual(39600)));
        // The bound itself is no longer than asked: waited in full, not drawn from below it.
        $this->assertSame(39600, ReleaseDelay::afterRetryAfter(39600.0));
        $this->assertThat(ReleaseDelay::afterRetryAfter(NAN), $this->logicalAnd($this->greaterThanOrEqual(0), $this->lessThanOrEqual(1)));
        $this->assertSame(39600, ReleaseDelay::MAX_RETRY_AFTER, '11 hours, as documented');
    }

    /**
     * A Retry-After shorter than the job's own backoff for this attempt releases it after the
     * backoff: a release counts as an attempt, and an outage answered with `Retry-After: 1` used
     * up the job's `$tries` within seconds. As Laravel reads it, a `$backoff` property wins over
     * a `backoff()` method; a list is indexed by the attempt (its last entry after its end).
     */
    /**
     * The dates servers send besides HTTP-date's forms are read as the client reads them
     * (crates/http/src/retry_after.rs, the same list): a job is not released sooner than the
     * call itself would have waited.
     */
    public function testRetryAfterDatesInOtherFormsAreReadAsTheClientReadsThem(): void
    {
        $now = 1_700_000_000.0; // + 3 s = Tue, 14 Nov 2023 22:13:23 GMT
        foreach (['Tue, 14 Nov 2023 22:13:23 GMT', 'Tue, 14 Nov 2023 22:13:23 +0000', 'Tue, 14 Nov 2023 22:13:23 UTC',
            'Tue, 14 Nov 2023 22:13:23 gmt', 'tue, 14 nov 2023 22:13:23 GMT', 'Tue, 14 Nov 2023 23:13:23 +0100',
            '14 Nov 2023 22:13:23 GMT', '2023-11-14T22:13:23Z', '2023-11-14t22:13:23z', '2023-11-14T23:13:23+01:00',
            'Tuesday, 14-Nov-23 22:13:23 GMT', 'Tue Nov 14 22:13:23 2023'] as $form) {
            $this->assertSame(3.0, RetryAfter::parse($form, $now), $form);
        }
        foreach (['2023-11-14', 'Tue, 14 Nov 2023', '14 Nov 2023 22:13:23 CET', 'tomorrow', 'Wed, 14 Nov 2023 22:13:23 +0000'] as $bad) {
            $this->assertNull(RetryAfter::parse($bad, $now), $bad);
        }
    }

    public function testARetryAfterShorterThanTheJobsBackoffReleasesAfterTheBackoff(): void
    {
        $this->boot([]);
        $released = function (object $job): int {
            (new ReleaseWhenUnavailable(3, 5))->handle($job, fn () => throw new RequestException(new Response(new PsrResponse(503, ['Retry-After' => '1']))));

            return end($job->released);
        };
        $jobWith = fn (int $attempt, mixed $backoff) => new class ($attempt, $backoff) {
            public array $released = [];

            public function __construct(private int $attempt, public mixed $backoff)
            {
            }

            public function attempts(): int
            {
                return $this->attempt;
            }

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        // The backoff, spread as a Retry-After is (up to a tenth more), within the 11 h bound.
        $within = fn (int $min, int $max) => $this->logicalAnd($this->greaterThanOrEqual($min), $this->lessThanOrEqual($max));
        $this->assertThat($released($jobWith(1, [60, 120])), $within(60, 66));
        $this->assertThat($released($jobWith(2, [60, 120])), $within(120, 132));
        $this->assertThat($released($jobWith(5, [60, 120])), $within(120, 132));
        $this->assertThat($released($jobWith(1, 30)), $within(30, 33));
        $this->assertThat($released($jobWith(2, '30,45')), $within(45, 49));
        $this->assertThat($released($jobWith(2, [30, '45,60'])), $within(45, 49));
        $this->assertThat($released($jobWith(1, [3600, 86400])), $within(3600, 3960));
        $this->assertThat($released($jobWith(2, [3600, 86400])), $within(39600 - 3960, 39600));
        // A date, as Laravel reads it: the seconds until it.
        $this->assertThat($released($jobWith(1, [new \DateTimeImmutable('+100 seconds')])), $within(98, 111));
        // No backoff: the Retry-After's (1 s, plus up to a tenth, at least 1 s).
        $this->assertThat($released($jobWith(1, null)), $this->logicalAnd($this->greaterThanOrEqual(1), $this->lessThanOrEqual(2)));
        // The JitteredBackoff trait's ranges.
        $jittered = new class () {
            use \Resilient\Laravel\Queue\JitteredBackoff;

            public array $released = [];
            public array $backoffRanges = [[30, 40], [240, 360]];

            public function attempts(): int
            {
                return 1;
            }

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        // A draw from [30, 40], spread as above (up to a tenth more): 30 to 44.
        $this->assertThat($released($jittered), $within(30, 44));
        // A Retry-After longer than the backoff is obeyed.
        $job = $jobWith(1, [5]);
        (new ReleaseWhenUnavailable(3, 5))->handle($job, fn () => throw new RequestException(new Response(new PsrResponse(429, ['Retry-After' => '100']))));
        $this->assertThat(end($job->released), $this->logicalAnd($this->greaterThanOrEqual(100), $this->lessThanOrEqual(110)));
    }

    /**
     * The upstream's Retry-After is obeyed whichever of our exceptions carries it: before, only an
     * UpstreamFailed's was read, so the README's own shipping client (deadline 0.85 s, 3 attempts)
     * failed the job on a 503 with `Retry-After: 5` (the wait does not fit the deadline: a
     * DeadlineExceeded), and a spent budget released it after [3, 5] s where the upstream asked 120.
     */
    public function testARetryAfterIsObeyedWhicheverExceptionCarriesIt(): void
    {
        [$deadlineName, $deadlineKey, $deadlineClient] = $this->upstreamClient('qe-ra-deadline', ['deadline' => 0.85, 'max_attempts' => 3]);
        [$budgetName, $budgetKey, $budgetClient] = $this->upstreamClient('qe-ra-budget', [
            'deadline' => 300, 'max_attempts' => 3, 'max_retry_after' => 300, 'budget' => ['ratio' => 0.0, 'floor' => 0],
        ]);
        $this->boot(['clients' => [$deadlineName => $deadlineClient, $budgetName => $budgetClient]]);
        $this->up->script($deadlineKey, [['status' => 503, 'headers' => ['Retry-After' => '5']]]);
        $this->up->script($budgetKey, [['status' => 503, 'headers' => ['Retry-After' => '120']]]);
        $middleware = new ReleaseWhenUnavailable(3, 5);

        foreach ([[$deadlineName, DeadlineExceeded::class, 5], [$budgetName, BudgetExhausted::class, 120]] as [$name, $class, $after]) {
            $job = $this->releasable();
            $thrown = null;
            $middleware->handle($job, function () use ($name, &$thrown) {
                try {
                    return \Resilient\Laravel\Facades\Resilient::client($name)->get('/x');
                } catch (\Throwable $e) {
                    throw $thrown = $e;
                }
            });
            $this->assertInstanceOf($class, $thrown, $name);
            $this->assertCount(1, $job->released, "$class with Retry-After $after: released, not failed");
            $this->assertThat($job->released[0], $this->logicalAnd(
                $this->greaterThanOrEqual($after),
                $this->lessThanOrEqual($after + max(1, intdiv($after, 10))),
            ), "$class: no sooner than the upstream asked ($after s)");
        }
        $this->assertCount(1, $this->up->attempts($deadlineKey, 1), 'the 503 was not retried: its wait did not fit');
        $this->assertCount(1, $this->up->attempts($budgetKey, 1), 'the 503 was not retried: the budget was spent');
    }

    /**
     * BudgetExhausted only ever follows a failed attempt (the budget refused its retry): the job
     * comes back no sooner than its own backoff for the attempt, as after the upstream's failure.
     * Before, it came back within the refusal range ([5, 30] s by default): in an outage the job
     * used up its `$tries` within a minute. FunnelFull and CircuitOpen keep the range.
     */
    public function testABudgetExhaustedIsReleasedNoSoonerThanTheJobsBackoff(): void
    {
        [$name, $key, $client] = $this->upstreamClient('qe-budget-backoff', [
            'max_attempts' => 2, 'retry_on' => [503], 'budget' => ['ratio' => 0.0, 'floor' => 0],
        ]);
        $this->boot(['clients' => [$name => $client]]);
        $this->up->script($key, [['status' => 503]]);
        $job = fn (int $attempt) => new class ($attempt) {
            public array $released = [];
            public array $backoff = [240, 540];

            public function __construct(private int $attempt)
            {
            }

            public function attempts(): int
            {
                return $this->attempt;
            }

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        $middleware = new ReleaseWhenUnavailable(3, 5);
        foreach ([1 => [240, 264], 2 => [540, 594]] as $attempt => [$min, $max]) {
            $released = $job($attempt);
            $thrown = null;
            $middleware->handle($released, function () use ($name, &$thrown) {
                try {
                    return \Resilient\Laravel\Facades\Resilient::client($name)->get('/x');
                } catch (\Throwable $e) {
                    throw $thrown = $e;
                }
            });
            $this->assertInstanceOf(BudgetExhausted::class, $thrown);
            $this->assertCount(1, $released->released, 'released, not failed');
            $this->assertThat($released->released[0], $this->logicalAnd($this->greaterThanOrEqual($min), $this->lessThanOrEqual($max)),
                "attempt $attempt: the job's backoff ($min s), spread as a Retry-After is");
        }
        $this->assertCount(2, $this->up->attempts($key, 2), 'one attempt per run: each retry was refused');

        foreach ([new \Resilient\FunnelFull('full'), new \Resilient\CircuitOpen('open')] as $e) {
            $released = $job(1);
            $middleware->handle($released, fn () => throw $e);
            $this->assertContains($released->released[0], [3, 4, 5], get_class($e));
        }
    }

    /**
     * Through `Http::resilient()` a refusal that stopped the retries of attempts that reached
     * nothing is Laravel's ConnectionException (the client's exception under it): the job is
     * released as for the client's own exception, a FunnelFull in the refusal range, a
     * BudgetExhausted after the job's backoff (also under Guzzle's RequestException, after a
     * body cut short); a connection failure whose attempts simply ran out is rethrown, as
     * without the middleware.
     */
    public function testARefusalUnderLaravelsConnectionExceptionIsReleasedAsTheRefusalItself(): void
    {
        $refused = ['base_url' => 'http://127.0.0.1:' . Run::freePort(), 'backoff' => ['base' => 0.001, 'cap' => 0.002]];
        [$spent, $free] = [Run::name('qe-conn-budget'), Run::name('qe-conn-ran-out')];
        $this->boot(['clients' => [
            $spent => $refused + ['max_attempts' => 2, 'budget' => ['ratio' => 0.0, 'floor' => 0]],
            $free => $refused + ['max_attempts' => 2],
        ]]);
        $job = new class () {
            public array $released = [];
            public array $backoff = [240];

            public function attempts(): int
            {
                return 1;
            }

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
        $middleware = new ReleaseWhenUnavailable(3, 5);
        $middleware->handle($job, fn () => \Illuminate\Support\Facades\Http::resilient($spent)->get('/x'));
        $this->assertCount(1, $job->released, 'released, not failed');
        $this->assertThat($job->released[0], $this->logicalAnd($this->greaterThanOrEqual(240), $this->lessThanOrEqual(264)));

        try {
            $middleware->handle($job, fn () => \Illuminate\Support\Facades\Http::resilient($free)->get('/x'));
            $this->fail('attempts that ran out were absorbed');
        } catch (\Illuminate\Http\Client\ConnectionException $e) {
            $this->assertInstanceOf(\Resilient\UpstreamFailed::class, $e->getPrevious()?->getPrevious());
        }
        $this->assertCount(1, $job->released);

        // As the bridge builds them: a refusal under Guzzle's RequestException (after a body cut
        // short, which Laravel 8 lets through as it is), a FunnelFull under ConnectionException.
        $request = new \GuzzleHttp\Psr7\Request('GET', 'http://127.0.0.1:9/x');
        foreach ([
            'budget under RequestException' => [new \GuzzleHttp\Exception\RequestException('cut', $request, null, new BudgetExhausted('spent')), 240, 264],
            'funnel under ConnectionException' => [new \Illuminate\Http\Client\ConnectionException('full', 0, new \GuzzleHttp\Exception\ConnectException('full', $request, new \Resilient\FunnelFull('full'))), 3, 5],
        ] as $what => [$thrown, $min, $max]) {
            $job->released = [];
            $middleware->handle($job, fn () => throw $thrown);
            $this->assertCount(1, $job->released, "$what: released, not failed");
            $this->assertThat($job->released[0], $this->logicalAnd($this->greaterThanOrEqual($min), $this->lessThanOrEqual($max)), $what);
        }
    }

    /**
     * Laravel's redis and database queues make a released job ready at the current second,
     * rounded down, plus the delay: released at 52.35 s with 3, it ran at 55.0 s, before the
     * 3 s the middleware promises (and before a Retry-After it obeyed). Measured against a
     * queue job that counts as RedisQueue does, at several moments within a second.
     */
    public function testAReleasedJobIsReadyNoSoonerThanItsDelayAsLaravelsQueuesCountIt(): void
    {
        $this->boot([]);
        $middleware = new ReleaseWhenUnavailable(3, 3);
        foreach ([0, 350, 700, 950] as $pastTheSecond) {
            usleep((1_000_000 - (int) (fmod(microtime(true), 1.0) * 1_000_000) + $pastTheSecond * 1000) % 1_000_000);
            $queued = new class () {
                public ?int $availableAt = null;
                public float $releasedAt = 0.0;

                public function release(int $delay): void
                {
                    $this->releasedAt = microtime(true);
                    $this->availableAt = \Illuminate\Support\Carbon::now()->addRealSeconds($delay)->getTimestamp();
                }

                public function isDeletedOrReleased(): bool
                {
                    return $this->availableAt !== null;
                }

                public function hasFailed(): bool
                {
                    return false;
                }
            };
            $job = new class ($queued) {
                use \Illuminate\Queue\InteractsWithQueue;

                public function __construct(object $queued)
                {
                    $this->job = $queued;
                }
            };
            $middleware->handle($job, fn () => throw new \Resilient\FunnelFull('full'));
            $this->assertNotNull($queued->availableAt, 'released');
            $this->assertGreaterThanOrEqual(3.0, $queued->availableAt - $queued->releasedAt, "released {$pastTheSecond} ms into a second");
            $this->assertLessThan(5.0, $queued->availableAt - $queued->releasedAt);
        }
    }

    /**
     * Retry-After as the client reads it (RFC 9110 §10.2.3): the three HTTP-date forms, and the
     * longest of several values. Before, an RFC 850 or asctime date, or two headers (joined
     * '5, 120'), read as no Retry-After at all and the job failed.
     */
    public function testRetryAfterIsReadAsTheClientReadsIt(): void
    {
        $now = 1_796_000_000.0;   // 2026-11-30 00:53:20 UTC
        $in120 = (int) $now + 120;
        foreach ([
            gmdate('D, d M Y H:i:s', $in120) . ' GMT',                                // IMF-fixdate
            gmdate('l, d-M-y H:i:s', $in120) . ' GMT',                                // RFC 850
            gmdate('D M ', $in120) . sprintf('%2d', (int) gmdate('j', $in120)) . gmdate(' H:i:s Y', $in120),   // asctime
            ' 120 ',
        ] as $value) {
            $this->assertSame(120.0, RetryAfter::parse($value, $now), $value);
        }
        // Dates the client refuses, PHP alone would read: a weekday that is not the date's
        // (2030-01-01 is a Tuesday; PHP took 'Mon' as a jump to the next Monday, six days on),
        // spaces doubled in asctime's form outside its day.
        $dates = ['Mon, 01 Jan 2030 00:00:00 GMT', 'Monday, 01-Jan-30 00:00:00 GMT', 'Mon Jan  1 00:00:00 2030', 'Tue Jan  1  00:00:00 2030', 'Mon, 01 Jan 2030 00:00:00 +0000'];
        foreach (['', '-1', '1.5', 'soon', 'Mon, 32 Dec 2026 00:00:00 GMT', ...$dates] as $value) {
            $this->assertNull(RetryAfter::parse($value, $now), var_export($value, true));
        }
        // Read leniently by both (RFC 9110 §5.6.7; crates/http/src/retry_after.rs): RFC 5322's
        // forms, a day of one digit, names in any case, spaces doubled, UTC.
        $in2030 = (float) gmmktime(0, 0, 0, 1, 1, 2030) - $now;
        foreach (['Tue, 1 Jan 2030 00:00:00 GMT', 'Tue, 01 jan 2030 00:00:00 GMT', 'Tue,  01 Jan 2030 00:00:00 GMT', 'Tue, 01 Jan 2030 00:00:00 UTC'] as $value) {
            $this->assertSame($in2030, RetryAfter::parse($value, $now), $value);
        }
        $this->assertSame(0.0, RetryAfter::parse('Thu, 01 Jan 1970 00:00:00 GMT', $now), 'a date past is now');
        // asctime's day, padded with a space or a zero (RFC 9110's date3), as httpdate reads it.
        $this->assertSame(0.0, RetryAfter::parse('Sun Nov  6 08:49:37 1994', $now));
        $this->assertSame(0.0, RetryAfter::parse('Sun Nov 06 08:49:37 1994', $now));
        $this->assertSame(120.0, RetryAfter::longest(['5', gmdate('D, d M Y H:i:s', $in120) . ' GMT', 'soon'], $now));
        $this->assertNull(RetryAfter::longest(['soon', ''], $now));

        // Through the middleware: two Retry-After headers on a Laravel 429, as on an UpstreamFailed.
        $this->boot([]);
        $job = $this->releasable();
        (new ReleaseWhenUnavailable(3, 5))->handle($job, fn () => throw new RequestException(new Response(new PsrResponse(429, ['Retry-After' => ['5', '120']]))));
        $this->assertThat($job->released[0] ?? null, $this->logicalAnd($this->greaterThanOrEqual(120), $this->lessThanOrEqual(132)));
        [$name, $key, $client] = $this->upstreamClient('qe-ra-two', ['max_attempts' => 1]);
        $this->boot(['clients' => [$name => $client]]);
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => ['5', gmdate('l, d-M-y H:i:s', time() + 60) . ' GMT']]]]);
        $job = $this->releasable();
        (new ReleaseWhenUnavailable(3, 5))->handle($job, fn () => \Resilient\Laravel\Facades\Resilient::client($name)->get('/x'));
        $this->assertThat($job->released[0] ?? null, $this->logicalAnd($this->greaterThanOrEqual(58), $this->lessThanOrEqual(67)), 'the longer of the two, an RFC 850 date');
    }

    /**
     * A job that already failed, deleted itself or released itself before our refusal: the
     * worker leaves it so (Laravel's Worker releases only a job that is none of these), and so
     * does the middleware, which throws the refusal as if it were not there. Releasing it
     * again ran a failed job 5 times under `queue:work`, and on the database queue a released
     * job released twice is two rows.
     */
    public function testAJobThatAlreadyFailedOrWasDeletedOrReleasedIsNotReleasedAgain(): void
    {
        $this->boot([]);
        $settle = [
            'failed' => fn (\Illuminate\Queue\Jobs\Job $q) => $q->markAsFailed(),
            'deleted' => fn (\Illuminate\Queue\Jobs\Job $q) => $q->delete(),
            'released' => fn (\Illuminate\Queue\Jobs\Job $q) => $q->release(7),
        ];
        $job = new class () {
            use \Illuminate\Queue\InteractsWithQueue;
        };
        foreach ($settle as $how => $settled) {
            $job->setJob($queued = $this->queueJob());
            try {
                (new ReleaseWhenUnavailable(3, 5))->handle($job, function () use ($settled, $queued): void {
                    $settled($queued);
                    throw new BudgetExhausted('shipping');
                });
                $this->fail("$how: the refusal was absorbed");
            } catch (BudgetExhausted) {
            }
            $this->assertSame($how === 'released' ? [7] : [], $queued->delays, "$how: released by the job only");
        }
        // A job still running is released as before.
        $job->setJob($queued = $this->queueJob());
        (new ReleaseWhenUnavailable(3, 5))->handle($job, fn () => throw new BudgetExhausted('shipping'));
        $this->assertCount(1, $queued->delays);
    }

    /**
     * JitteredBackoff's ranges written wrong are refused naming the rule: a range of one end
     * was PHP's "Undefined array key 1" (an ErrorException under Laravel), and an empty list
     * made backoff() an empty list, which Laravel's payload turns into '' and its worker into
     * a retry at once, whatever its --backoff.
     */
    public function testJitteredBackoffRangesWrittenWrongAreRefusedNamingTheRule(): void
    {
        $job = fn (array $ranges) => new class ($ranges) {
            use \Resilient\Laravel\Queue\JitteredBackoff;

            public function __construct(public array $backoffRanges)
            {
            }
        };
        $range = 'a backoff range must be [min, max] with 0 <= min <= max <= 31536000 (a year), got ';
        $plain = 'a backoff must be [min, max] or whole seconds from 0 to 31536000 (a year), got ';
        foreach ([
            [[[60]], $range . '[60]'],
            [[[1, 2, 3]], $range . '[1, 2, 3]'],
            [[['a', 'b']], $range . "['a', 'b']"],
            [[[30, 10]], $range . '[30, 10]'],
            [[[NAN, [1]]], $range . '[NAN, array]'],
            [[[INF, INF]], $range . '[INF, INF]'],
            [[], '$backoffRanges is empty'],
            // Before: PHP's own TypeErrors from inside the trait, or accepted as written.
            [[null], $plain . 'null'],
            [['abc'], $plain . 'string'],
            [[-5], $plain . '-5'],
            [[[5, 1e20]], $range . '[5, 1.0E+20]'],
        ] as [$ranges, $message]) {
            try {
                $job($ranges)->backoff();
                $this->fail('accepted ' . var_export($ranges, true));
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage(), var_export($ranges, true));
            }
        }
        $this->assertSame([5, 7], $job([5, [7, 7]])->backoff(), 'a plain number is a fixed delay');
        $notAList = new class () {
            use \Resilient\Laravel\Queue\JitteredBackoff;

            public $backoffRanges = 5;
        };
        try {
            $notAList->backoff();
            $this->fail('accepted $backoffRanges = 5');
        } catch (\InvalidArgumentException $e) {
            $this->assertSame('resilient: $backoffRanges must be a list of [min, max] ranges or seconds, got int', $e->getMessage());
        }
        $this->assertNull($job([])->releaseDelay(), 'no range: no delay of its own');
    }

    /** A queue job (as a worker's) that records the delays it was released with. */
    private function queueJob(): \Illuminate\Queue\Jobs\Job
    {
        return new class () extends \Illuminate\Queue\Jobs\Job implements \Illuminate\Contracts\Queue\Job {
            public array $delays = [];

            public function attempts()
            {
                return 1;
            }

            public function getJobId()
            {
                return 'j1';
            }

            public function getRawBody()
            {
                return '{}';
            }

            public function release($delay = 0)
            {
                parent::release($delay);
                $this->delays[] = $delay;
            }
        };
    }

    /** A job stand-in that records its releases. */
    private function releasable(): object
    {
        return new class () {
            public array $released = [];

            public function release(int $delay): void
            {
                $this->released[] = $delay;
            }
        };
    }

    /**
     * `resilient.queue.deadline_margin` below 0 (or not finite) would give a deadline past the
     * job's `$timeout` (-5 with $timeout 20: 25 s), defeating the middleware: refused by name.
     */
    public function testANegativeOrNonFiniteDeadlineMarginIsRefusedNamingTheSetting(): void
    {
        $this->boot([]);
        $job = new class () {
            public $timeout = 20;
        };
        foreach ([-5, '-5', -0.5, INF, -INF, NAN, '1e999', '5s', 'abc', [5], true] as $margin) {
            $this->app['config']->set('resilient.queue.deadline_margin', $margin);
            foreach ([
                'secondsFor' => fn () => (new WithinDeadline())->secondsFor($job),
                'handle' => fn () => (new WithinDeadline())->handle($job, fn () => $this->fail('the job ran')),
            ] as $how => $call) {
                try {
                    $seconds = $call();
                    $this->fail(sprintf('margin %s accepted by %s: %s s', var_export($margin, true), $how, var_export($seconds, true)));
                } catch (\InvalidArgumentException $e) {
                    $this->assertStringContainsString('resilient.queue.deadline_margin', $e->getMessage());
                }
            }
        }
        foreach ([[0, 20.0], ['0', 20.0], ['', 18.0], [null, 18.0], ['5', 15.0], [2.5, 17.5]] as [$margin, $seconds]) {
            $this->app['config']->set('resilient.queue.deadline_margin', $margin);
            $this->assertSame($seconds, (new WithinDeadline())->secondsFor($job), var_export($margin, true));
        }
        // The constructor's margin is held to the same rule.
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('WithinDeadline: margin must be');
        new WithinDeadline(margin: -5);
    }

    /**
     * A `resilient.queue.worker_timeout` that is not a number of seconds is refused by name:
     * before, '2m' was read as no setting at all, 60 s.
     */
    public function testAWorkerTimeoutThatIsNotSecondsIsRefusedNamingTheSetting(): void
    {
        foreach (['2m', 'sixty', [60], true, -30, '-1', INF, NAN] as $timeout) {
            $this->boot(['queue' => ['worker_timeout' => $timeout]]);
            try {
                $seconds = (new WithinDeadline())->secondsFor(new \stdClass());
                $this->fail(sprintf('worker_timeout %s accepted: %s s', var_export($timeout, true), var_export($seconds, true)));
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('resilient.queue.worker_timeout', $e->getMessage());
            }
        }
        foreach ([[null, 58.0], ['', 58.0], ['90', 88.0], [30.5, 28.5], [0, null]] as [$timeout, $seconds]) {
            $this->boot(['queue' => ['worker_timeout' => $timeout, 'deadline_margin' => 2]]);
            $this->assertSame($seconds, WithinDeadline::timeoutOf(new \stdClass()) === null ? null : (new WithinDeadline())->secondsFor(new \stdClass()), var_export($timeout, true));
        }
    }

    /** `release_delay => [env('MIN'), env('MAX')]` with both unset is the default range, not [0, 0]. */
    public function testANullReleaseDelayEndIsTheDefaults(): void
    {
        foreach ([[[null, null], [5, 30]], [[10, null], [10, 30]], [[null, 3], [3, 3]], [[40, null], [40, 40]], [['', ''], [5, 30]]] as [$given, $range]) {
            $this->boot(['queue' => ['release_delay' => $given]]);
            $delay = ReleaseDelay::configured();
            $this->assertSame($range, [$delay->min, $delay->max], json_encode($given));
        }
        $this->boot(['queue' => ['release_delay' => ['soon', 30]]]);
        $this->expectException(\InvalidArgumentException::class);
        ReleaseDelay::configured();
    }

    /**
     * A release delay is at most 11 hours, as a Retry-After's (ReleaseDelay::MAX_RETRY_AFTER):
     * a longer end is taken as 11 hours. A range that is not finite numbers is refused as
     * written. Before, [0, 1e12] released a job for thousands of years, [NAN, NAN] was read as
     * [0, 0] (refused jobs came straight back), and [5, INF] was refused as "[5, 0]".
     */
    public function testAReleaseDelayPastElevenHoursIsElevenHoursAndOneNotFiniteIsRefusedAsWritten(): void
    {
        foreach ([
            [[NAN, NAN], '[NAN, NAN]'],
            [[5, INF], '[5, INF]'],
            [[-1, 5], '[-1, 5]'],
            [[30, 5], '[30, 5]'],
            [['soon', 30], "['soon', 30]"],
        ] as [$range, $shown]) {
            $this->boot(['queue' => ['release_delay' => $range]]);
            try {
                $delay = ReleaseDelay::configured();
                $this->fail(sprintf('release_delay %s accepted as [%d, %d]', $shown, $delay->min, $delay->max));
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('resilient.queue.release_delay must be [min, max] with 0 <= min <= max', $e->getMessage());
                $this->assertStringEndsWith("got $shown", $e->getMessage());
            }
        }
        foreach ([[[0, 1e12], [0, 39600]], [[1e20, 2e20], [39600, 39600]], [[60, 86400], [60, 39600]], [['5', '50000'], [5, 39600]], [[0, 39600], [0, 39600]], [[0, 43200], [0, 39600]]] as [$range, $taken]) {
            $this->boot(['queue' => ['release_delay' => $range]]);
            $delay = ReleaseDelay::configured();
            $this->assertSame($taken, [$delay->min, $delay->max], json_encode($range));
        }
        $this->assertSame(39600, (new \ReflectionProperty(ReleaseWhenUnavailable::class, 'delay'))->getValue(new ReleaseWhenUnavailable(0, 10 ** 12))->max);
        foreach ([[-1, 5], [10, 5]] as [$min, $max]) {
            try {
                new ReleaseWhenUnavailable($min, $max);
                $this->fail("ReleaseWhenUnavailable($min, $max) accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertSame("resilient: release delay must be 0 <= min <= max seconds, got [$min, $max]", $e->getMessage());
            }
        }
    }

    /**
     * A job's timeout past a year (the longest deadline) gives its calls a deadline of a year, as
     * Queue\Funnel caps its lease; seconds past a year given to the middleware are refused when
     * it is made. Before, both threw a ValueError from Deadline::within at every run.
     */
    public function testATimeoutPastAYearGivesADeadlineOfAYear(): void
    {
        $this->boot([]);
        $job = new class () {
            public $timeout = 100000000;
        };
        $this->assertSame(31536000.0, (new WithinDeadline())->secondsFor($job));
        $this->assertSame('ran', (new WithinDeadline())->handle($job, fn () => 'ran'));
        $this->assertSame(31536000.0, (new WithinDeadline(31536000))->secondsFor($job));
        try {
            new WithinDeadline(4e7);
            $this->fail('seconds 4e7 accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertSame('Queue\\WithinDeadline: seconds must be a finite number above 0 and at most 31536000 (a year), got 40000000', $e->getMessage());
        }
    }

    /**
     * A job whose `$timeout` is beyond what a lease takes (1e9, INF) runs with a lease of a year
     * instead of failing at every run; a funnel given in code that cannot be built names the
     * middleware.
     */
    public function testTheQueueFunnelOnOddValues(): void
    {
        $this->boot([]);
        foreach ([1e9, INF] as $timeout) {
            $job = new class ($timeout) {
                public function __construct(public float $timeout)
                {
                }
            };
            $ran = (new \Resilient\Laravel\Queue\Funnel(\Resilient\Tests\Harness\Run::name('qf'), limit: 2))->handle($job, fn () => 'ran');
            $this->assertSame('ran', $ran);
        }
        $name = \Resilient\Tests\Harness\Run::name('qr');
        try {
            (new \Resilient\Laravel\Queue\Funnel($name, 2, 2))->handle(new \stdClass(), fn () => 'ran');
            $this->fail('a reserve of the whole limit must be refused');
        } catch (\InvalidArgumentException $e) {
            $this->assertSame("Queue\\Funnel('$name'): reserve: must be between 0 and limit - 1 (1), got 2", $e->getMessage());
        }
    }

    /**
     * The lease a Queue\Funnel takes follows the worker's alarm: armed (`queue:work`, which kills
     * the job at its timeout), the timeout plus a tenth (at least 1 s), or the alarm plus as much
     * when it rings later (a worker `--timeout` over the job's configured default); not armed
     * (`queue:work --once`, no pcntl), a day, as for a job without a timeout. The alarm is left
     * armed. QueueTest runs the unarmed case under a real worker.
     */
    public function testTheQueueFunnelsLeaseFollowsTheWorkersAlarm(): void
    {
        $this->boot([]);
        $leaseFor = function (int $timeout): float {
            $job = new class ($timeout) {
                public function __construct(public int $timeout)
                {
                }
            };
            $funnel = new \Resilient\Laravel\Queue\Funnel(\Resilient\Tests\Harness\Run::name('qa'), limit: 2, lease: 1.0);

            return (new \ReflectionMethod($funnel, 'funnel'))->invoke($funnel, $job)->lease();
        };
        try {
            $this->assertSame(0, pcntl_alarm(0), 'no alarm armed before');
            $this->assertSame(86400.0, $leaseFor(20));
            pcntl_alarm(20);
            $this->assertSame(22.0, $leaseFor(20));
            $this->assertSame(20, pcntl_alarm(0), 'the alarm is armed again');
            pcntl_alarm(50);
            $this->assertSame(55.0, $leaseFor(20));
            $this->assertSame(50, pcntl_alarm(0));
        } finally {
            pcntl_alarm(0);
        }
    }

    /**
     * The job's deadline ends before the worker's alarm, which is what kills it: `queue:work
     * --timeout=7` with the default `resilient.queue.worker_timeout` (60) gave a job without a
     * `$timeout` 54 s, and the worker killed it at 7 s mid-call. An alarm armed (by the worker,
     * with the job's timeout) bounds the timeout the deadline is taken from; a job's own shorter
     * timeout still counts. The alarm is left armed.
     */
    public function testTheJobsDeadlineEndsBeforeTheWorkersAlarm(): void
    {
        $this->boot([]);
        $job = new \stdClass();
        $ownTimeout = new class () {
            public int $timeout = 20;
        };
        try {
            $this->assertSame(0, pcntl_alarm(0), 'no alarm armed before');
            $this->assertSame(54.0, (new WithinDeadline())->secondsFor($job), 'no alarm: the configured worker timeout');
            pcntl_alarm(7);
            $this->assertSame(6.0, (new WithinDeadline())->secondsFor($job), '--timeout=7: 7 s less the 1 s margin');
            $this->assertSame(7, pcntl_alarm(0), 'the alarm is armed again');
            pcntl_alarm(50);
            $this->assertSame(18.0, (new WithinDeadline())->secondsFor($ownTimeout), "the job's own 20 s, before the alarm");
            $this->assertSame(45.0, (new WithinDeadline(45))->secondsFor($job), 'seconds given are kept');
            $this->assertSame(50, pcntl_alarm(0));
        } finally {
            pcntl_alarm(0);
        }
    }

    /** Seconds of 0 or less (or not finite) would refuse every call of the job at once: refused, as the route middleware's. */
    public function testSecondsThatLeaveNoTimeAreRefused(): void
    {
        foreach ([0.0, -1.0, INF, NAN] as $seconds) {
            try {
                new WithinDeadline($seconds);
                $this->fail("seconds $seconds accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('seconds must be a finite number above 0 and at most 31536000', $e->getMessage());
            }
        }
        $this->assertSame(0.5, (new WithinDeadline(0.5))->secondsFor(new \stdClass()));
    }

    /** Without the extension the queue middleware says how to install it, as Resilient::client() does. */
    public function testWithoutTheExtensionTheQueueMiddlewareSaysHowToInstallIt(): void
    {
        $setup = self::childApp(['funnels' => ['sap' => ['limit' => 2]]]) . <<<'PHP'
            $app->boot();
            $job = new class () {
                public $timeout = 20;
                public function release($delay) {}
            };
            PHP;
        $this->assertEachSaysHowToInstall($setup, <<<'PHP'
            fn () => (new Resilient\Laravel\Queue\WithinDeadline())->handle($job, fn () => 'ran'),
            fn () => (new Resilient\Laravel\Queue\WithinDeadline(5))->handle($job, fn () => 'ran'),
            fn () => (new Resilient\Laravel\Queue\Funnel('sap', limit: 2))->handle($job, fn () => 'ran'),
            fn () => (new Resilient\Laravel\Queue\Funnel('sap'))->handle($job, fn () => 'ran'),
            PHP, 4);
    }
}
