<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use GuzzleHttp\Psr7\Response as PsrResponse;
use Illuminate\Http\Client\RequestException;
use Illuminate\Http\Client\Response;
use Resilient\Laravel\Queue\ReleaseDelay;
use Resilient\Laravel\Queue\ReleaseWhenUnavailable;
use Resilient\Laravel\Queue\RetryAfter;
use Resilient\Laravel\Queue\WithinDeadline;
use Resilient\Tests\Harness\PhpProcess;

/**
 * The job middleware on values a worker meets rarely: an absurd Retry-After, a margin that would
 * put the deadline past the job's timeout, a worker PHP without the extension. Run in this
 * process on hand-made jobs; QueueTest runs the middleware under a real worker.
 */
final class QueueEdgeCasesTest extends PackageTestCase
{
    /**
     * A Retry-After longer than a day releases the job for a day (plus the usual tenth): before,
     * a number past PHP's integers came out negative or wrapped (`9223372036854775807` released
     * the job with -9223372036854775808 s).
     */
    public function testAHugeRetryAfterReleasesTheJobForAtMostADay(): void
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
        $afters = ['9223372036854775807', '99999999999999999999', str_repeat('9', 400), '86400', '1000000'];
        foreach ($afters as $after) {
            $middleware->handle($job, fn () => throw new RequestException(new Response(new PsrResponse(429, ['Retry-After' => $after]))));
            $this->assertThat(end($job->released), $this->logicalAnd(
                $this->greaterThanOrEqual(86400),
                $this->lessThanOrEqual(86400 + 8640),
            ), substr($after, 0, 30));
        }
        // An HTTP-date far ahead, as an UpstreamFailed's last response carries it (same reading).
        $far = ReleaseDelay::afterRetryAfter(RetryAfter::parse('Fri, 31 Dec 9999 23:59:59 GMT', microtime(true)));
        $this->assertThat($far, $this->logicalAnd($this->greaterThanOrEqual(86400), $this->lessThanOrEqual(86400 + 8640)));
        // Below the bound nothing changes: no sooner than asked, up to a tenth more.
        $this->assertThat(ReleaseDelay::afterRetryAfter(40.0), $this->logicalAnd($this->greaterThanOrEqual(40), $this->lessThanOrEqual(44)));
        $this->assertThat(ReleaseDelay::afterRetryAfter(INF), $this->logicalAnd($this->greaterThanOrEqual(86400), $this->lessThanOrEqual(86400 + 8640)));
        $this->assertThat(ReleaseDelay::afterRetryAfter(NAN), $this->logicalAnd($this->greaterThanOrEqual(0), $this->lessThanOrEqual(1)));
        $this->assertSame(86400, ReleaseDelay::MAX_RETRY_AFTER, 'a day, as documented');
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
        foreach ([-5, '-5', -0.5, INF, -INF, NAN, '1e999'] as $margin) {
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

    /** Seconds of 0 or less (or not finite) would refuse every call of the job at once: refused, as the route middleware's. */
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

    public function testSecondsThatLeaveNoTimeAreRefused(): void
    {
        foreach ([0.0, -1.0, INF, NAN] as $seconds) {
            try {
                new WithinDeadline($seconds);
                $this->fail("seconds $seconds accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('seconds must be a finite number above 0', $e->getMessage());
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
