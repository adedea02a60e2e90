<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Bus\BusServiceProvider;
use Illuminate\Queue\Events\JobProcessed;
use Illuminate\Queue\QueueServiceProvider;
use Illuminate\Support\Facades\Event;
use Resilient\FunnelFull;
use Resilient\Laravel\Queue\Funnel;
use Resilient\Laravel\Queue\ReleaseWhenUnavailable;
use Resilient\Tests\Harness\Run;

/**
 * The job middleware where nothing can take a refused job back: Laravel's `sync` queue (and
 * `dispatchSync()`), whose release() puts nothing anywhere, and a job run without a queue job.
 * The refusal must reach the caller; before, JobProcessed fired and the work never happened.
 */
final class QueueSyncTest extends PackageTestCase
{
    /** @var list<string> what the jobs did, in order */
    public static array $ran = [];

    public static function setUpBeforeClass(): void
    {
        parent::setUpBeforeClass();
        require_once __DIR__ . '/support/SyncQueueJobs.php';
    }

    protected function setUp(): void
    {
        parent::setUp();
        self::$ran = [];
    }

    public function testARefusalOnTheSyncQueueReachesTheCaller(): void
    {
        $this->bootQueue();
        $processed = 0;
        Event::listen(JobProcessed::class, function () use (&$processed) {
            $processed++;
        });
        foreach ([
            'dispatch() on sync' => fn (SyncRefusedJob $job) => dispatch($job),
            'dispatchSync()' => fn (SyncRefusedJob $job) => SyncRefusedJob::dispatchSync($job->refusal),
        ] as $how => $dispatch) {
            try {
                $dispatch(new SyncRefusedJob("funnel 'sync-test' is full"));
                $this->fail("$how: the refused job was lost (no exception, the work never happened)");
            } catch (FunnelFull $e) {
                $this->assertSame("funnel 'sync-test' is full", $e->getMessage(), $how);
            }
        }
        $this->assertSame(['handle', 'handle'], self::$ran);
        $this->assertSame(0, $processed, 'no JobProcessed for a job that did not do its work');
    }

    /** A job object run by hand (no queue job behind it): nothing to release it to either. */
    public function testARefusalWithoutAQueueJobIsRethrown(): void
    {
        $this->boot([]);
        $job = new SyncRefusedJob('full');
        $this->assertNull($job->job);
        $this->expectException(FunnelFull::class);
        (new ReleaseWhenUnavailable(1, 1))->handle($job, fn ($j) => $j->handle());
    }

    /**
     * A job with a release() of its own (no InteractsWithQueue) is taken at its word, whatever
     * its own `$job` property holds (a domain object, or one it keeps protected).
     */
    public function testAJobWithItsOwnReleaseIsReleasedWhateverItsJobPropertyHolds(): void
    {
        $this->boot([]);
        $jobs = [
            'a public domain $job' => new class () {
                public object $job;
                public array $released = [];
                public function __construct() { $this->job = new \stdClass(); }
                public function release(int $delay): void { $this->released[] = $delay; }
            },
            'a protected $job' => new class () {
                protected ?object $job = null;
                public array $released = [];
                public function release(int $delay): void { $this->released[] = $delay; }
            },
        ];
        foreach ($jobs as $what => $job) {
            $out = (new ReleaseWhenUnavailable(3, 3))->handle($job, fn () => throw new FunnelFull('full'));
            $this->assertNull($out, $what);
            $this->assertSame([3], $job->released, "$what: released through its own release()");
        }
    }

    /** A full Queue\Funnel on the sync queue: the job does not run, and the caller is told why. */
    public function testAFullQueueFunnelOnTheSyncQueueThrowsFunnelFull(): void
    {
        $name = Run::name('sync-funnel');
        $this->bootQueue();
        $held = (new \Resilient\Funnel($name, 1))->tryAcquire();
        $this->assertNotNull($held);
        try {
            dispatch(new SyncFunnelJob($name));
            $this->fail('the job was lost: neither run nor refused');
        } catch (FunnelFull $e) {
            $this->assertStringContainsString("funnel '$name' is full", $e->getMessage());
            $this->assertStringContainsString('cannot be released', $e->getMessage());
        } finally {
            $held->release();
        }
        $this->assertSame([], self::$ran, 'the job did not run');
        dispatch(new SyncFunnelJob($name));
        $this->assertSame(['funnel'], self::$ran, 'with a free slot it runs');
    }

    private function bootQueue(): void
    {
        $this->boot([], ['queue' => ['default' => 'sync', 'connections' => ['sync' => ['driver' => 'sync']]]]);
        $this->app->register(BusServiceProvider::class);
        $this->app->register(QueueServiceProvider::class);
    }
}
