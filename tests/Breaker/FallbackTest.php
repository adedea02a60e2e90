<?php

declare(strict_types=1);

namespace Resilient\Tests\Breaker;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Client;
use Resilient\CircuitOpen;
use Resilient\Response;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Http\HttpTestCase;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * The `fallback` option: a callable given the `Unavailable` a call ended with, whose value the
 * call returns instead of throwing (seed 000's page decisions in one line); an exception it
 * throws propagates; a call that succeeds never calls it.
 */
final class FallbackTest extends HttpTestCase
{
    public function testTheCallReturnsTheFallbacksValueAndItReceivesTheException(): void
    {
        $key = $this->up->key('fallback');
        $this->up->script($key, [['status' => 503]]);
        $seen = [];
        $client = new Client(Run::name('fallback'), [
            'base_url' => $this->up->base($key),
            'max_attempts' => 2,
            'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'fallback' => function (Unavailable $e) use (&$seen): array {
                $seen[] = $e;
                return ['stock' => 7, 'is_live' => false];
            },
        ]);
        $this->assertSame(['stock' => 7, 'is_live' => false], $client->get('/stock'));
        $this->assertCount(1, $seen);
        $this->assertInstanceOf(UpstreamFailed::class, $seen[0]);
        $this->assertSame(503, $seen[0]->getCode());
        $this->assertSame(503, $seen[0]->response()?->status(), 'the last response comes along');
        $this->assertStringContainsString('max_attempts (2) reached', $seen[0]->getMessage());
        $this->assertCount(2, $this->up->attempts($key, 2), 'the retries ran before the fallback');
        // request() and the other verbs too.
        $this->assertSame(['stock' => 7, 'is_live' => false], $client->request('GET', '/stock'));
        $this->assertSame(['stock' => 7, 'is_live' => false], $client->post('/stock', ['a' => 1]));
    }

    public function testAnOpenCircuitGoesToTheFallbackWithoutSending(): void
    {
        $key = $this->up->key('fallback-open');
        $this->up->script($key, [['status' => 503]]);
        $classes = [];
        $name = Run::name('fallback');
        $client = new Client($name, [
            'base_url' => $this->up->base($key),
            'max_attempts' => 1,
            'budget' => false,
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 2, 'window' => 10.0, 'open_for' => 30.0],
            'fallback' => function (Unavailable $e) use (&$classes): array {
                $classes[] = get_class($e);
                return ['credit' => 100, 'refresh_failed' => true];
            },
        ]);
        for ($i = 0; $i < 5; $i++) {
            $this->assertSame(['credit' => 100, 'refresh_failed' => true], $client->get('/credit'));
        }
        $this->assertSame([UpstreamFailed::class, UpstreamFailed::class, CircuitOpen::class, CircuitOpen::class, CircuitOpen::class], $classes);
        $this->assertCount(2, $this->up->attempts($key, 2));
        // The host-wide metrics saw it: 5 fallbacks, 3 circuit refusals, the breaker open once.
        $m = \Resilient\Metrics::snapshot()[$name];
        $this->assertSame(5, $m['fallbacks']);
        $this->assertSame(3, $m['shed']['circuit']);
        $this->assertSame(2, $m['attempts']);
        $this->assertSame('open', $m['breaker']['state']);
        $this->assertSame(1, $m['breaker']['transitions']['open']);
    }

    public function testAThrowingFallbackPropagates(): void
    {
        $key = $this->up->key('fallback-throw');
        $this->up->script($key, [['status' => 503]]);
        $name = Run::name('fallback');
        $client = new Client($name, [
            'base_url' => $this->up->base($key),
            'max_attempts' => 1,
            'fallback' => function (Unavailable $e): never {
                throw new \DomainException('no stale copy either', 0, $e);
            },
        ]);
        try {
            $client->get('/x');
            $this->fail('expected the fallback\'s exception');
        } catch (\DomainException $e) {
            $this->assertSame('no stale copy either', $e->getMessage());
            $this->assertInstanceOf(UpstreamFailed::class, $e->getPrevious());
        }
        $this->assertSame(0, \Resilient\Metrics::snapshot()[$name]['fallbacks'], 'no fallback value was used');
        // Rethrowing the given exception is the same as having no fallback.
        $rethrow = new Client(Run::name('fallback'), [
            'base_url' => $this->up->base($key),
            'max_attempts' => 1,
            'fallback' => fn (Unavailable $e) => throw $e,
        ]);
        $this->expectException(UpstreamFailed::class);
        $rethrow->get('/x');
    }

    public function testASuccessNeverCallsIt(): void
    {
        $key = $this->up->key('fallback-ok');
        $this->up->script($key, [['status' => 404]]);
        $client = new Client(Run::name('fallback'), [
            'base_url' => $this->up->base($key),
            'fallback' => fn () => throw new \LogicException('not called'),
        ]);
        $r = $client->get('/x');
        $this->assertInstanceOf(Response::class, $r);
        $this->assertSame(404, $r->status(), 'a final status is an answer, not a failure');
    }

    public function testPrivateMethodsGivenAsCallbacksWorkWhereverTheClientIsUsed(): void
    {
        $key = $this->up->key('fallback-private');
        $this->up->script($key, [['status' => 503]]);
        $service = new PrivateCallbacks();
        $client = $service->client(Run::name('fallback'), $this->up->base($key));
        // Called from outside the class that gave them: they were checked in its scope, where
        // they are callable, and stay bound to it.
        $this->assertSame('cached', $client->get('/x'));
        $this->assertSame(['status 503; max_attempts (1) reached'], $service->seen);
        $this->assertSame('cached', $service->inside($client));
        $this->assertCount(2, $service->seen);
        $results = $client->pool(['a' => ['GET', '/x']]);
        $this->assertInstanceOf(UpstreamFailed::class, $results['a']);
        $this->assertCount(3, $service->seen, 'pool() calls on_attempt too');
    }

    public function testACallbackGivenByReferenceIsTheValueAtConstruction(): void
    {
        $key = $this->up->key('fallback-ref');
        $this->up->script($key, [['status' => 503]]);
        $none = null;
        new Client('x', ['on_attempt' => &$none, 'fallback' => &$none]);
        $calls = 0;
        $callback = function () use (&$calls): string {
            $calls++;
            return 'fallback';
        };
        $client = new Client(Run::name('fallback'), [
            'base_url' => $this->up->base($key),
            'max_attempts' => 1,
            'fallback' => &$callback,
        ]);
        $callback = null;
        $this->assertSame('fallback', $client->get('/x'), 'reassigning the variable changes nothing');
        $this->assertSame(1, $calls);
    }

    public function testAFallbackMustBeCallable(): void
    {
        $this->expectException(\TypeError::class);
        $this->expectExceptionMessage("option 'fallback' must be of type ?callable, int given");
        new Client('x', ['fallback' => 42]);
    }
}

/** A service that builds its client with private methods as callbacks. */
final class PrivateCallbacks
{
    /** @var list<string> */
    public array $seen = [];

    public function client(string $name, string $base): Client
    {
        return new Client($name, [
            'base_url' => $base,
            'max_attempts' => 1,
            'on_attempt' => [$this, 'record'],
            'fallback' => [$this, 'cached'],
        ]);
    }

    public function inside(Client $client): mixed
    {
        return $client->get('/x');
    }

    private function record(array $attempt): void
    {
        $this->seen[] = $attempt['reason'];
    }

    private function cached(Unavailable $e): string
    {
        return 'cached';
    }
}
