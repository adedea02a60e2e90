<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/../../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * Base of the tests/Client suites (the client as a Guzzle replacement, against real servers on
 * loopback): the run's mock upstream, a client factory that records every attempt through
 * `on_attempt` (the client's own count, compared with what the servers saw), and small helpers.
 */
abstract class ClientTestCase extends TestCase
{
    protected MockUpstream $up;

    /** @var list<array<string,mixed>> on_attempt records of the clients made by client() */
    protected array $attemptLog = [];

    protected function setUp(): void
    {
        $this->up = MockUpstream::shared();
        $this->attemptLog = [];
    }

    /**
     * A client on a fresh name whose attempts land in $this->attemptLog. Retries are allowed
     * (3 attempts, millisecond backoff) so a test shows that an outcome is NOT retried.
     */
    protected function client(string $baseUrl, array $options = []): Client
    {
        return new Client(Run::name('client'), $options + [
            'base_url' => $baseUrl,
            'max_attempts' => 3,
            'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'timeout' => 10,
            'on_attempt' => function (array $a): void {
                $this->attemptLog[] = $a;
            },
        ]);
    }

    /** The exception $f throws (fails the test when it returns). */
    protected static function thrown(callable $f): \Throwable
    {
        try {
            $f();
        } catch (\Throwable $e) {
            return $e;
        }
        self::fail('expected an exception');
    }

    /** A one-line description of an exception, for assertion messages. */
    protected static function describe(\Throwable $e): string
    {
        return get_class($e) . '(' . $e->getCode() . '): ' . $e->getMessage();
    }
}
