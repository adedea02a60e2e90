<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Client;
use Resilient\Tests\Harness\Run;
use Resilient\Unavailable;

/**
 * A service that keeps its client, whose `on_attempt` or `fallback` refers back to the service
 * (`fn ($a) => $this->log($a)`), is a reference cycle: PHP's cycle collector must see the
 * callables the client holds, or every such service leaks for the life of the process (a queue
 * worker that builds one per job grows without bound). A collection must also leave the
 * callables of a live client intact.
 */
final class CycleTest extends ClientTestCase
{
    public function testServicesThatHoldTheirClientThroughItsCallablesAreCollected(): void
    {
        CycleService::$destroyed = 0;
        gc_collect_cycles();
        for ($i = 0; $i < 40; $i++) {
            new CycleService('http://127.0.0.1:9', $i % 2 === 0 ? 'on_attempt' : 'fallback');
        }
        $this->assertSame(0, CycleService::$destroyed, 'each service is in a cycle: not freed by its refcount alone');
        $collected = gc_collect_cycles();
        $this->assertSame(40, CycleService::$destroyed, 'the collector found every service through its client\'s callables');
        $this->assertGreaterThanOrEqual(40 * 3, $collected, 'each cycle: service, client, closure');
    }

    public function testAClientInACycleThroughAReferenceIsCollected(): void
    {
        $before = gc_status()['collected'];
        for ($i = 0; $i < 10; $i++) {
            unset($client);   // the previous client keeps the reference its closure holds
            $client = new Client(Run::name('cycle-ref'), [
                'base_url' => 'http://127.0.0.1:9',
                'on_attempt' => function () use (&$client): void {
                },
            ]);
        }
        unset($client);
        gc_collect_cycles();
        $this->assertGreaterThanOrEqual(10 * 2, gc_status()['collected'] - $before, 'client and closure of each of the 10');
    }

    public function testACollectionLeavesALiveClientsCallablesWorking(): void
    {
        $key = $this->up->key('cycle-live');
        $this->up->script($key, [['status' => 200], ['status' => 503]], 'repeat_last');
        $svc = new CycleService($this->up->base($key), 'both');
        for ($round = 0; $round < 3; $round++) {
            $alias = $svc;   // makes the service a possible root, so the collector walks it
            unset($alias);
            for ($i = 0; $i < 20; $i++) {
                new CycleService('http://127.0.0.1:9', 'on_attempt');
            }
            gc_collect_cycles();
        }
        $this->assertSame(200, $svc->client->get('/ok')->status());
        $this->assertSame(1, $svc->attempts, 'on_attempt still runs after the collections');
        $this->assertSame(['stale' => true], $svc->client->get('/fail'), 'the fallback still answers');
        $this->assertSame(2, $svc->attempts);
        $this->assertSame(1, $svc->fallbacks);
        $this->assertCount(2, $this->up->attempts($key, 2));
    }
}

/** A service that keeps its client, whose callables call back into the service. */
final class CycleService
{
    public static int $destroyed = 0;
    public Client $client;
    public int $attempts = 0;
    public int $fallbacks = 0;
    /** Something worth collecting, as a real service would hold. */
    private string $payload;

    public function __construct(string $baseUrl, string $which)
    {
        $this->payload = str_repeat('x', 10_000);
        $options = ['base_url' => $baseUrl, 'max_attempts' => 1, 'timeout' => 5];
        if ($which !== 'fallback') {
            $options['on_attempt'] = fn (array $a) => $this->attempted($a);
        }
        if ($which !== 'on_attempt') {
            $options['fallback'] = fn (Unavailable $e) => $this->stale($e);
        }
        $this->client = new Client(Run::name('cycle'), $options);
    }

    private function attempted(array $a): void
    {
        $this->attempts++;
    }

    private function stale(Unavailable $e): array
    {
        $this->fallbacks++;
        return ['stale' => true];
    }

    public function __destruct()
    {
        self::$destroyed++;
    }
}
