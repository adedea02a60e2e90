<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/MockUpstream.php';
require_once __DIR__ . '/WebRunner.php';

use Resilient\Client;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/** Base of the HTTP client suites: a shared mock upstream and a client factory. */
abstract class HttpTestCase extends TestCase
{
    protected MockUpstream $up;

    protected function setUp(): void
    {
        $this->up = MockUpstream::shared();
    }

    /** A client on a fresh key (its own funnel/budget name), the key scripted with $steps. */
    protected function client(string $key, array $options = []): Client
    {
        return new Client(Run::name('http'), $options + ['base_url' => $this->up->base($key)]);
    }

    /**
     * The backoff an `on_attempt` reason says was drawn (`retry after backoff 37ms`), in ms
     * (shown rounded down to the millisecond, or in µs below one); null when it says none.
     */
    protected static function backoffMs(string $reason): ?float
    {
        if (preg_match('/retry after backoff (\d+)(ms|µs)/', $reason, $m) !== 1) {
            return null;
        }
        return $m[2] === 'ms' ? (float) $m[1] : $m[1] / 1000;
    }

    /** Gaps in ms between consecutive arrivals, from the upstream's own clock. */
    protected static function gapsMs(array $attempts): array
    {
        $gaps = [];
        for ($i = 1; $i < count($attempts); $i++) {
            $gaps[] = $attempts[$i]['t_ms'] - $attempts[$i - 1]['t_ms'];
        }
        return $gaps;
    }
}
