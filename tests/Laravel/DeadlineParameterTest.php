<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Http\Request;
use Resilient\Deadline;
use Resilient\Laravel\Middleware\WithinDeadline;
use Symfony\Component\HttpFoundation\StreamedResponse;

/**
 * `->middleware('resilient.deadline:<seconds>')` through Laravel's router: a parameter that is
 * not a positive number of seconds is refused by name, never read as a 0 s (or other) deadline.
 */
final class DeadlineParameterTest extends PackageTestCase
{
    public function testAGoodParameterScopesTheRequest(): void
    {
        $remaining = $this->request('0.9');
        $this->assertGreaterThan(0.5, $remaining);
        $this->assertLessThanOrEqual(0.9, $remaining);
    }

    /**
     * A streamed body (`response()->stream()`, `streamDownload()`) is written after the route's
     * middleware returned: its calls keep the request's deadline, counted from the request's
     * start. Before, they ran with none (`Deadline::remaining()` null in the callback).
     */
    public function testAStreamedBodyKeepsTheRequestsDeadline(): void
    {
        $this->boot([]);
        $seen = [];
        $router = $this->app['router'];
        $router->get('/export', function () use (&$seen) {
            $seen['controller'] = Deadline::remaining();

            return new StreamedResponse(function () use (&$seen) {
                $seen['stream'] = Deadline::remaining();
                echo 'rows';
            });
        })->middleware('resilient.deadline:0.9');
        $response = $router->dispatch(Request::create('/export'));
        $this->assertNull(Deadline::remaining(), 'no deadline outside the request');
        ob_start();
        $response->sendContent();
        $this->assertSame('rows', ob_get_clean());
        $this->assertNull(Deadline::remaining(), 'none after the body either');
        $this->assertIsFloat($seen['stream'] ?? null, 'the streamed body ran within the deadline');
        $this->assertGreaterThan(0.0, $seen['stream']);
        $this->assertLessThan($seen['controller'], $seen['stream'], 'the same deadline, counted from the request start');
    }

    public function testABadParameterIsRefusedByName(): void
    {
        foreach ([
            '0,9' => "resilient.deadline:0,9: one parameter, the seconds, got 2 ('0', '9'): Laravel splits middleware parameters on commas, write 0.9 with a dot",
            'abc' => "resilient.deadline:abc: the parameter must be the deadline in seconds, a finite number above 0 and at most 31536000 (a year) (e.g. resilient.deadline:0.9), got 'abc'",
            '' => "resilient.deadline:: the parameter must be the deadline in seconds, a finite number above 0 and at most 31536000 (a year) (e.g. resilient.deadline:0.9), got ''",
            'INF' => "got 'INF'",
            '1e999' => "got '1e999'",
            '0' => "got '0'",
            '-1' => "got '-1'",
            '1.5s' => "got '1.5s'",
            // Past a year, what Deadline::within() takes: refused naming the middleware, not a
            // ValueError at every request.
            '1e9' => "at most 31536000 (a year) (e.g. resilient.deadline:0.9), got '1e9'",
            '31536001' => "got '31536001'",
        ] as $parameter => $message) {
            try {
                $seen = $this->request((string) $parameter);
                $this->fail("resilient.deadline:$parameter ran the request with a deadline of " . var_export($seen, true));
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString($message, $e->getMessage(), (string) $parameter);
                $this->assertStringStartsWith('resilient: route middleware resilient.deadline:', $e->getMessage());
            }
        }
    }

    /** As job middleware (seconds from the constructor) the same rule holds, at construction. */
    public function testBadSecondsForTheConstructorAreRefused(): void
    {
        $this->assertGreaterThan(59.0, (new WithinDeadline(60))->handle('job', fn () => Deadline::remaining()));
        $this->assertGreaterThan(31535999.0, (new WithinDeadline(31536000))->handle('job', fn () => Deadline::remaining()), 'a year is taken');
        foreach ([0.0, -1.0, INF, NAN, 31536001.0, 1e9] as $seconds) {
            try {
                new WithinDeadline($seconds);
                $this->fail("WithinDeadline($seconds) must be refused");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('a finite number above 0 and at most 31536000 (a year)', $e->getMessage());
            }
        }
    }

    private function request(string $parameter): mixed
    {
        $this->boot([]);
        $router = $this->app['router'];
        $router->get('/deadline', fn () => json_encode(Deadline::remaining()))->middleware("resilient.deadline:$parameter");

        return json_decode($router->dispatch(Request::create('/deadline'))->getContent());
    }

    /** Without the extension the middleware says how to install it, as Queue\\WithinDeadline does, not "class not found". */
    public function testWithoutTheExtensionTheMiddlewareSaysHowToInstallIt(): void
    {
        $this->assertEachSaysHowToInstall(self::childApp([]) . '$app->boot();', <<<'PHP'
            fn () => (new Resilient\Laravel\Middleware\WithinDeadline(60))->handle(new stdClass(), fn () => 'ran'),
            fn () => (new Resilient\Laravel\Middleware\WithinDeadline())->handle('request', fn () => 'ran', '0.9'),
            PHP, 2);
    }
}
