<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;
use Resilient\Deadline;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\Middleware\WithinDeadline;
use Resilient\Laravel\ResilientManager;
use Resilient\Laravel\ResilientServiceProvider;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/** The Laravel package on Debian's Laravel 8: provider, config, facade, deadline middleware. */
final class ServiceProviderTest extends TestCase
{
    private Application $app;

    public static function setUpBeforeClass(): void
    {
        require_once '/usr/share/php/Illuminate/autoload.php';
        require_once __DIR__ . '/../../php/autoload.php';
    }

    protected function setUp(): void
    {
        $this->app = new Application(Run::dir() . '/laravel');
        $this->app->instance('config', new Repository([
            'resilient' => [
                'funnels' => [
                    'lv-sap' => ['limit' => 2, 'reserve' => 1, 'lease' => 5.0],
                    'lv-shared' => ['limit' => 4, 'reserve' => 2, 'share' => true],
                ],
                'budgets' => ['lv-sap' => ['ratio' => 0.5, 'floor' => 1, 'window' => 60.0]],
                'clients' => [
                    'lv-shipping' => ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 2],
                    'lv-learned' => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 'auto', 'max' => 16]],
                ],
            ],
        ]));
        Facade::setFacadeApplication($this->app);
        $this->app->register(ResilientServiceProvider::class);
        $this->app->boot();
    }

    protected function tearDown(): void
    {
        Facade::clearResolvedInstances();
        Container::setInstance(null);
    }

    public function testTheManagerIsASingletonBuiltFromConfig(): void
    {
        $this->assertSame($this->app->make('resilient'), $this->app->make(ResilientManager::class));

        $funnel = Resilient::funnel('lv-sap');
        $this->assertInstanceOf(\Resilient\Funnel::class, $funnel);
        // CLI is a background caller: limit 2 - reserve 1 = one slot.
        $lease = $funnel->tryAcquire();
        $this->assertNotNull($lease);
        $this->assertNull($funnel->tryAcquire());
        $lease->release();

        $budget = Resilient::budget('lv-sap');
        $budget->recordOriginal();
        $budget->recordOriginal();
        $this->assertTrue($budget->tryConsume());   // floor 1
        $this->assertTrue($budget->tryConsume());   // + 0.5 × 2
        $this->assertFalse($budget->tryConsume());
    }

    public function testAFunnelsShareComesFromConfig(): void
    {
        $this->assertTrue(Resilient::funnel('lv-shared')->share());
        $this->assertFalse(Resilient::funnel('lv-sap')->share());
        $job = new \Resilient\Laravel\Queue\Funnel('lv-queue-shared', limit: 4, reserve: 2, share: true);
        $funnel = (fn () => $this->funnel(new \stdClass()))->call($job);
        $this->assertTrue($funnel->share());
    }

    /**
     * The queue middleware holds its slot for the whole job: a lease shorter than the job's
     * timeout (here 0.5 s against 3 s) would expire while the job runs and let a second job in.
     */
    public function testTheQueueFunnelsLeaseOutlastsTheJobsTimeout(): void
    {
        $name = Run::name('lv-queue-lease');
        $middleware = new \Resilient\Laravel\Queue\Funnel($name, limit: 1, lease: 0.5);
        $job = new class () {
            public $timeout = 3;
        };
        $seen = $middleware->handle($job, function () use ($name): string {
            usleep(700_000);   // past the funnel's own 0.5 s lease
            $other = (new \Resilient\Funnel($name, 1))->tryAcquire();

            return $other === null ? 'still held' : 'slot taken by another job';
        });
        $this->assertSame('still held', $seen);
        $this->assertSame(0, (new \Resilient\Funnel($name, 1))->inFlight(), 'given back after the job');
    }

    /**
     * `$timeout = 0` is Laravel's "no timeout" (the worker never kills the job): no deadline is
     * derived from it, and the queue funnel's lease must not lapse under the running job.
     */
    public function testAJobWithoutATimeoutGetsNoDerivedDeadlineAndALongLease(): void
    {
        $job = new class () {
            public $timeout = 0;
        };
        $this->assertNull((new \Resilient\Laravel\Queue\WithinDeadline())->secondsFor($job));
        $this->assertNull((new \Resilient\Laravel\Queue\WithinDeadline())->handle($job, fn () => Deadline::remaining()), 'no deadline scope');
        $this->assertSame(45.0, (new \Resilient\Laravel\Queue\WithinDeadline(45))->secondsFor($job), 'given seconds still apply');
        $this->app['config']->set('resilient.queue.worker_timeout', 0);   // queue:work --timeout=0
        $this->assertNull((new \Resilient\Laravel\Queue\WithinDeadline())->secondsFor(new \stdClass()));

        $middleware = new \Resilient\Laravel\Queue\Funnel(Run::name('lv-queue-no-timeout'), limit: 1, lease: 5.0);
        $this->assertSame(86400.0, (fn () => $this->funnel($job))->call($middleware)->lease(), 'a day');
    }

    /** An empty env value (`RESILIENT_DEADLINE_MARGIN=`, `RESILIENT_WORKER_TIMEOUT=`) is no setting, not 0. */
    public function testEmptyQueueSettingsMeanTheDefaults(): void
    {
        $job = new class () {
            public $timeout = 60;
        };
        $this->app['config']->set('resilient.queue.deadline_margin', '');
        $this->assertSame(54.0, (new \Resilient\Laravel\Queue\WithinDeadline())->secondsFor($job), 'a tenth, not no margin');
        $this->app['config']->set('resilient.queue.deadline_margin', '5');
        $this->assertSame(55.0, (new \Resilient\Laravel\Queue\WithinDeadline())->secondsFor($job));
        $this->app['config']->set('resilient.queue.worker_timeout', '');
        $this->assertSame(55.0, (new \Resilient\Laravel\Queue\WithinDeadline())->secondsFor(new \stdClass()), "queue:work's 60 s less 5");
    }

    public function testClientsAreBuiltOncePerName(): void
    {
        $client = Resilient::client('lv-shipping');
        $this->assertInstanceOf(\Resilient\Client::class, $client);
        $this->assertSame($client, Resilient::client('lv-shipping'));
    }

    /** A learned limit lives in the client; a Funnel object needs a fixed one, and says so. */
    public function testAFunnelFromAClientWithALearnedLimitIsAClearError(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('the funnel of client "lv-learned" has a learned limit (\'auto\'), which only the client applies');
        Resilient::funnel('lv-learned');
    }

    public function testAnUnknownNameSaysWhatIsConfigured(): void
    {
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('no funnel named "nope" in config/resilient.php (known: lv-sap, lv-shared)');
        Resilient::funnel('nope');
    }

    /**
     * `defaults.context` the extension refuses (RESILIENT_CONTEXT=bogus): clients refuse it as
     * an option, so Funnel objects and the queue middleware, which read it through the
     * `resilient.context` setting, refuse it too instead of running as `auto`.
     */
    public function testARefusedDefaultContextIsRefusedByFunnelsToo(): void
    {
        $before = ini_get('resilient.context');
        try {
            $app = new Application(Run::dir() . '/laravel');
            $app->instance('config', new Repository(['resilient' => [
                'defaults' => ['context' => 'bogus'],
                'funnels' => ['lv-sap' => ['limit' => 2]],
                'clients' => ['lv-shipping' => ['base_url' => 'http://127.0.0.1:9']],
            ]]));
            Facade::setFacadeApplication($app);
            $app->register(ResilientServiceProvider::class);
            $app->boot();
            $said = "resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got 'bogus'";
            foreach ([
                'Resilient::funnel' => fn () => Resilient::funnel('lv-sap'),
                'queue middleware' => fn () => (new \Resilient\Laravel\Queue\Funnel('lv-queue-ctx', limit: 1))
                    ->handle(new \stdClass(), fn () => 'ran'),
                'client' => fn () => Resilient::client('lv-shipping'),
            ] as $what => $use) {
                try {
                    $use();
                    $this->fail("$what accepted the refused context");
                } catch (\InvalidArgumentException|\ValueError $e) {
                    $this->assertStringContainsString("got 'bogus'", $e->getMessage(), $what);
                    if ($what !== 'client') {
                        $this->assertSame($said, $e->getMessage(), $what);
                    }
                }
            }
        } finally {
            ini_set('resilient.context', (string) $before);
            \Resilient\Laravel\ResilientManager::declareContext(null);
        }
    }

    /**
     * `RESILIENT_CONTEXT=true` (Laravel's env() makes it a bool) is refused by clients (option
     * 'context' must be a string): Funnel and RetryBudget objects built from config refuse it too,
     * as they refuse 'bogus', instead of running as `auto`. Null and '' are "not set".
     */
    public function testADefaultContextThatIsNoStringIsRefusedByFunnelsAndBudgetsToo(): void
    {
        $before = ini_get('resilient.context');
        try {
            foreach ([[true, 'bool true'], [false, 'bool false'], [5, 'int 5'], [['web'], 'array']] as [$context, $shown]) {
                $this->bootWithContext($context);
                $said = "resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got $shown";
                $this->assertSame($said, ResilientManager::contextProblem(), var_export($context, true));
                foreach ([
                    'Resilient::funnel' => fn () => Resilient::funnel('lv-sap'),
                    'Resilient::budget' => fn () => Resilient::budget('lv-sap'),
                    'queue middleware' => fn () => (new \Resilient\Laravel\Queue\Funnel('lv-queue-ctx', limit: 1))
                        ->handle(new \stdClass(), fn () => 'ran'),
                ] as $what => $use) {
                    try {
                        $use();
                        $this->fail(sprintf('%s accepted the context %s', $what, var_export($context, true)));
                    } catch (\InvalidArgumentException $e) {
                        $this->assertSame($said, $e->getMessage(), $what);
                    }
                }
            }
            foreach ([null, ''] as $unset) {
                $this->bootWithContext($unset);
                $this->assertNull(ResilientManager::contextProblem(), var_export($unset, true));
                $this->assertSame(2, Resilient::funnel('lv-sap')->limit());
            }
        } finally {
            ini_set('resilient.context', (string) $before);
            ResilientManager::declareContext(null);
        }
    }

    /**
     * A test suite boots one app per test in one process: the context one app declared must not
     * stay for the next app, which declares none (it stayed `web`, and a CLI funnel of limit 2
     * with reserve 1 gave a background caller both slots).
     */
    public function testAContextDeclaredByOneAppIsNotKeptByTheNextOne(): void
    {
        $before = ini_get('resilient.context');
        try {
            $this->bootWithContext('web');
            $this->assertTrue(\Resilient\Context::isWeb());
            $this->bootWithContext(null);
            $this->assertSame($before, ini_get('resilient.context'), 'the setting as it was before any app');
            $this->assertFalse(\Resilient\Context::isWeb(), 'a CLI process again');
            $funnel = new \Resilient\Funnel(Run::name('lv-ctx-next'), 2, 1);
            $this->assertNotNull($lease = $funnel->tryAcquire());
            $this->assertNull($funnel->tryAcquire(), 'a background caller gets the limit less the reserve');
            $lease->release();
            ini_set('resilient.context', 'console');
            $this->bootWithContext(null);
            $this->assertSame('console', ini_get('resilient.context'), "a value the app did not set is not the app's to undo");
        } finally {
            ini_set('resilient.context', (string) $before);
            ResilientManager::declareContext(null);
        }
    }

    private function bootWithContext(mixed $context): void
    {
        $app = new Application(Run::dir() . '/laravel');
        $app->instance('config', new Repository(['resilient' => [
            'defaults' => ['context' => $context],
            'funnels' => ['lv-sap' => ['limit' => 2]],
            'budgets' => ['lv-sap' => ['ratio' => 0.5]],
        ]]));
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($app);
        $app->register(ResilientServiceProvider::class);
        $app->boot();
    }

    public function testTheDeadlineMiddlewareScopesTheRequestAndRestoresAfter(): void
    {
        $middleware = new WithinDeadline();
        $seen = $middleware->handle('request', fn ($r) => Deadline::remaining(), '0.9');
        $this->assertGreaterThan(0.5, $seen);
        $this->assertLessThanOrEqual(0.9, $seen);
        $this->assertNull(Deadline::remaining());

        // As job middleware the deadline comes from the constructor.
        $seen = (new WithinDeadline(60))->handle('job', fn ($j) => Deadline::remaining());
        $this->assertGreaterThan(59.0, $seen);

        $this->assertTrue($this->app['router']->getMiddleware()['resilient.deadline'] === WithinDeadline::class);
    }
}
