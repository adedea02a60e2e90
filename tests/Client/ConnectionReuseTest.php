<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Deadline;

/**
 * Calls of one process reuse their kept-alive connection, also under a deadline. The
 * general (reqwest) transport, which serves https, proxies and TLS options, once cached its
 * clients by the attempt's connect limit, which a deadline cuts to what is left of it: every
 * call under `Deadline::within` or a `deadline` option built a client of its own, and so a new
 * connection (a TLS handshake on https). The mock upstream numbers the connections it accepts;
 * `verify => false` sends plain http through that transport.
 */
final class ConnectionReuseTest extends ClientTestCase
{
    private const CALLS = 12;

    public function testCallsInsideADeadlineScopeShareOneConnection(): void
    {
        [$key, $client] = $this->generalTransportClient('reuse-within');
        Deadline::within(8.0, function () use ($client): void {
            for ($i = 0; $i < self::CALLS; $i++) {
                usleep(2000); // the remainder, and so the connect limit, differs on every call
                $this->assertSame(200, $client->get('/x')->status());
            }
        });
        $this->assertConnections(1, $key);
    }

    public function testCallsWithADeadlineOptionShareOneConnection(): void
    {
        [$key, $client] = $this->generalTransportClient('reuse-option', ['deadline' => 5.0]);
        for ($i = 0; $i < self::CALLS; $i++) {
            usleep(2000);
            $this->assertSame(200, $client->get('/x')->status());
        }
        $this->assertConnections(1, $key);
    }

    public function testASequentialPoolWithADeadlineSharesOneConnection(): void
    {
        [$key, $client] = $this->generalTransportClient('reuse-pool', ['deadline' => 5.0]);
        $requests = [];
        for ($i = 0; $i < self::CALLS; $i++) {
            $requests[] = ['GET', "/p$i"];
        }
        foreach ($client->pool($requests, 1) as $r) {
            $this->assertSame(200, $r->status());
        }
        $this->assertConnections(1, $key);
    }

    public function testCallsWithAndWithoutATightDeadlineShareOneConnection(): void
    {
        // A deadline shorter than connect_timeout cuts the connect limit to what is left: it
        // must not pick another client (another connection, another TLS handshake).
        [$key, $client] = $this->generalTransportClient('reuse-tight', ['connect_timeout' => 1.0]);
        for ($i = 0; $i < self::CALLS / 2; $i++) {
            $this->assertSame(200, $client->get('/plain')->status());
            $this->assertSame(200, Deadline::within(0.5, fn () => $client->get('/tight'))->status());
        }
        $this->assertConnections(1, $key);
    }

    /** A client whose calls take the general transport, on a fresh key answering 200. */
    private function generalTransportClient(string $tag, array $options = []): array
    {
        $key = $this->up->key($tag);
        return [$key, $this->client($this->up->base($key), $options + ['verify' => false])];
    }

    private function assertConnections(int $expected, string $key): void
    {
        $rows = $this->up->attempts($key, self::CALLS);
        $this->assertCount(self::CALLS, $rows);
        $connections = array_unique(array_column($rows, 'connection'));
        $this->assertNotContains(0, $connections, 'the upstream numbers its connections');
        $this->assertCount($expected, $connections, 'connections used: ' . implode(', ', $connections));
    }
}
