<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Client;
use Resilient\Tests\Harness\Run;

/**
 * Must show 11 (options and URLs): malformed URLs and bad option types are clear errors naming
 * the option, never a crash. (Retry-After values: RetryAfterTest; fuzzing: the proptests of
 * crates/http, run by `cargo test`.)
 */
final class BadInputTest extends HttpTestCase
{
    /** @return array<string, array{array<string,mixed>, class-string, string}> */
    public static function badOptions(): array
    {
        $value = \ValueError::class;
        $type = \TypeError::class;
        return [
            'unknown key' => [['timout' => 1], $value, "option 'timout': unknown option"],
            'negative timeout' => [['timeout' => -1], $value, "option 'timeout': must not be negative, got -1"],
            'NAN deadline' => [['deadline' => NAN], $value, "option 'deadline': must be a finite number of seconds, got NaN"],
            'INF timeout' => [['timeout' => INF], $value, "option 'timeout': must be a finite number of seconds, got inf"],
            'non-numeric string timeout' => [['timeout' => 'abc'], $type, "option 'timeout' must be of type float, string given"],
            'array timeout' => [['timeout' => []], $type, "option 'timeout' must be of type float, array given"],
            'zero attempts' => [['max_attempts' => 0], $value, "option 'max_attempts': must be an integer between 1 and 100, got 0"],
            'huge attempts' => [['max_attempts' => PHP_INT_MAX], $value, "option 'max_attempts': must be an integer between 1 and 100, got 9223372036854775807"],
            'huge min calls' => [['circuit' => ['min_calls' => 1 << 40]], $value, "option 'circuit.min_calls': must be an integer between 1 and 1000000, got 1099511627776"],
            'negative min calls' => [['circuit' => ['min_calls' => -1]], $value, "option 'circuit.min_calls': must be an integer between 1 and 1000000, got -1"],
            'negative attempts' => [['max_attempts' => -1], $value, "option 'max_attempts': must be an integer between 1 and 100, got -1"],
            // PHP's own words for an anonymous class: no NUL byte, no file path
            'anonymous object' => [['timeout' => new class {}], $type, "option 'timeout' must be of type float, class@anonymous given"],
            'float attempts' => [['max_attempts' => 2.5], $type, "option 'max_attempts' must be of type int, float given"],
            'backoff typo' => [['backoff' => ['bsae' => 1]], $value, "option 'backoff.bsae': unknown option"],
            'backoff not an array' => [['backoff' => 5], $type, "option 'backoff' must be of type array, int given"],
            'retry_on 700' => [['retry_on' => [429, 700]], $value, "option 'retry_on': must contain HTTP error statuses 400..599, got 700"],
            // A success or a redirect retried: 3 attempts of what worked, then UpstreamFailed.
            'retry_on 200' => [['retry_on' => [200]], $value, "option 'retry_on': must contain HTTP error statuses 400..599, got 200"],
            'retry_on 301' => [['retry_on' => [503, 301]], $value, "option 'retry_on': must contain HTTP error statuses 400..599, got 301"],
            // One key for every call: a server that honours it answers the second call with the
            // first one's stored result (and every POST of the client became retryable).
            'client-wide idempotency key' => [['headers' => ['Idempotency-Key' => 'fixed']], $value, "option 'headers.Idempotency-Key': is one per call, never one for every call of a client: give it per request ('idempotency_key', or the request's headers)"],
            'reserve >= limit' => [['funnel' => ['limit' => 2, 'reserve' => 2]], $value, "option 'funnel.reserve': "],
            'funnel without limit' => [['funnel' => []], $value, "option 'funnel.limit': is required"],
            'share not a bool' => [['funnel' => ['limit' => 4, 'reserve' => 2, 'share' => 'yes']], $type, "option 'funnel.share' must be of type bool, string given"],
            'share as an int' => [['funnel' => ['limit' => 4, 'reserve' => 2, 'share' => 1]], $type, "option 'funnel.share' must be of type bool, int given"],
            'share without reserve' => [['funnel' => ['limit' => 4, 'share' => true]], $value, "option 'funnel.share': needs a reserve ≥ 1: the slots web callers keep"],
            'learned limit with redis' => [['funnel' => ['limit' => 'auto'], 'backend' => 'redis://:pw@127.0.0.1:6379'], $value, "option 'funnel.limit': 'auto' is not available with the redis backend (a learned limit lives in each host's shared memory); give a number"],
            'budget ratio' => [['budget' => ['ratio' => -0.5]], $value, "option 'budget.ratio': "],
            'circuit ratio' => [['circuit' => ['failure_ratio' => 2]], $value, "option 'circuit.failure_ratio'"],
            'circuit streak' => [['circuit' => ['consecutive_failures' => 0]], $value, "option 'circuit.consecutive_failures': must be an integer between 1 and 1000000, got 0"],
            'redis backend, bad db' => [['backend' => 'redis://:pw@127.0.0.1:6379/x'], $value, "option 'backend': its path must be the database number (/0, /1, …) or nothing"],
            'redis backend, a user without a password' => [['backend' => 'redis://pw@127.0.0.1:6379/0'], $value, "option 'backend': names a user but no password, and a user alone is never sent"],
            'unknown backend' => [['backend' => 'mysql://:pw@h'], $value, "option 'backend': must be 'shm' or a redis://, rediss:// or unix:// URL"],
            'on_backend_error' => [['on_backend_error' => 'retry'], $value, "option 'on_backend_error': must be 'local', 'open' or 'closed'"],
            'base_url not a url' => [['base_url' => 'not a url'], $value, "option 'base_url'"],
            'base_url ftp' => [['base_url' => 'ftp://x'], $value, "option 'base_url': must be an http:// or https:// URL"],
            'header with newline' => [['headers' => ['X-A' => "a\r\nInjected: 1"]], $value, "option 'headers.X-A'"],
            // The URL parser would drop them silently: another password, another port.
            'proxy with a tab' => [['proxy' => "http://u:pw\tx@127.0.0.1:3128"], $value, "option 'proxy': contains a control character (a line break, tab or NUL); percent-encode it"],
            'proxy with a line break' => [['proxy' => ['http' => "http://127.0.0.1:31\n28"]], $value, "option 'proxy.http': contains a control character"],
            'object option' => [['timeout' => new \stdClass()], $type, "option 'timeout' must be of type float, stdClass given"],
            'on_attempt not callable' => [['on_attempt' => 'no_such_function_xyz'], $type, "option 'on_attempt' must be of type ?callable, string given"],
        ];
    }

    /**
     * One `backoff` bound given alone: the other one, left at its default, gives way (a `base`
     * of 0.5 s above the default `cap` of 0.2 s is no error about a cap nobody wrote). Both
     * given the wrong way round: refused.
     */
    public function testABackoffBoundGivenAloneMovesTheOther(): void
    {
        foreach ([['base' => 0.5], ['cap' => 0.01], ['base' => 0.5, 'cap' => 0.5]] as $backoff) {
            $this->assertInstanceOf(Client::class, new Client('backoff', ['backoff' => $backoff]), json_encode($backoff));
        }
        $this->expectException(\ValueError::class);
        $this->expectExceptionMessage("option 'backoff.cap': must not be smaller than backoff.base");
        new Client('backoff', ['backoff' => ['base' => 0.5, 'cap' => 0.1]]);
    }

    /** @dataProvider badOptions */
    public function testBadOptionsAreClearErrors(array $options, string $class, string $expected): void
    {
        try {
            new Client('bad-input', $options);
            $this->fail("expected $class");
        } catch (\ValueError | \TypeError $e) {
            $this->assertSame($class, get_class($e), $e->getMessage());
            $this->assertStringStartsWith($expected, $e->getMessage());
            $this->assertStringNotContainsString(':pw@', $e->getMessage());
            $this->assertStringNotContainsString("\0", $e->getMessage());
        }
    }

    public function testMalformedUrlsAreClearErrors(): void
    {
        $key = $this->up->key('badurl');
        $client = $this->client($key);
        foreach ([
            'http://' => "option 'url': is not a valid URL",
            'http://exa mple.com/' => "option 'url': is not a valid URL",
            'gopher://x/' => "option 'url': must be a path or an http:// or https:// URL",
            'http://[::1' => "option 'url': is not a valid URL",
        ] as $url => $expected) {
            try {
                $client->get($url);
                $this->fail("expected ValueError for $url");
            } catch (\ValueError $e) {
                $this->assertStringStartsWith($expected, $e->getMessage(), $url);
            }
        }
        $noBase = new Client('bad-input');
        $this->expectException(\ValueError::class);
        $this->expectExceptionMessage("option 'url': is a relative path but the client has no 'base_url'");
        $noBase->get('/relative');
    }

    /**
     * A pool item is `[method, path, options?]` and nothing else: options under another key
     * (`'options' => [...]`, index 3) were dropped unseen and the request went out without its
     * body or headers. Refused before anything is sent.
     */
    public function testAPoolItemWithOptionsElsewhereThanIndexTwoIsRefused(): void
    {
        $key = $this->up->key('pool-shape');
        $this->up->script($key, [['status' => 200]], 'repeat_last');
        $client = $this->client($key);
        foreach ([
            ['POST', '/x', 'options' => ['json' => ['x' => 1]]],
            [0 => 'POST', 1 => '/x', 3 => ['json' => ['x' => 1]]],
            ['POST', '/x', ['json' => ['x' => 1]], 'extra'],
        ] as $i => $item) {
            try {
                $client->pool(['a' => $item]);
                $this->fail("item $i: expected ValueError");
            } catch (\ValueError $e) {
                $this->assertSame("pool request 'a': must be [method, path, options?]", $e->getMessage(), "item $i");
            }
        }
        // A method or path that is not UTF-8 is said as such, as get() says it, not as a shape.
        foreach ([[['GET', "/caf\xE9"], 'path'], [["G\xE9T", '/x'], 'method']] as [$item, $what]) {
            try {
                $client->pool(['a' => $item]);
                $this->fail("$what: expected ValueError");
            } catch (\ValueError $e) {
                $this->assertSame("pool request 'a': the $what is not valid UTF-8", $e->getMessage());
            }
        }
        $this->assertCount(0, $this->up->attempts($key, 0), 'nothing was sent');
        $ok = $client->pool(['a' => ['GET', '/x'], 'b' => ['GET', '/x', null], 'c' => [1 => '/x', 0 => 'GET', 2 => []]]);
        $this->assertSame([200, 200, 200], array_map(fn ($r) => $r->status(), array_values($ok)));
    }

    /** Among a pool's many items, an option error says which item it is about. */
    public function testAPoolItemsOptionErrorNamesTheItem(): void
    {
        $client = $this->client($this->up->key('pool-option'));
        foreach ([
            [\ValueError::class, ['timout' => 1], "pool request 'b': option 'timout': unknown option (known: query, json, body, form, multipart, headers, idempotency_key, timeout, connect_timeout, sink, verify, cert, ssl_key, proxy, allow_redirects, decode_content)"],
            [\ValueError::class, ['timeout' => -1], "pool request 'b': option 'timeout': must not be negative, got -1"],
            [\TypeError::class, ['timeout' => []], "pool request 'b': option 'timeout' must be of type float, array given"],
        ] as [$class, $options, $message]) {
            try {
                $client->pool(['a' => ['GET', '/x'], 'b' => ['GET', '/x', $options]]);
                $this->fail("accepted: $message");
            } catch (\ValueError|\TypeError $e) {
                $this->assertSame([$class, $message], [get_class($e), $e->getMessage()]);
            }
        }
        // PHP code run while an item's options are read (a jsonSerialize(), which may build a
        // client of its own, or suspend a Fiber) makes errors that are not about the item.
        $seen = [];
        $item = new class ($seen) implements \JsonSerializable {
            public function __construct(private array &$seen)
            {
            }

            public function jsonSerialize(): mixed
            {
                try {
                    new \Resilient\Client('other', ['bogus' => 1]);
                } catch (\ValueError $e) {
                    $this->seen[] = $e->getMessage();
                }
                \Fiber::suspend();

                return ['a' => 1];
            }
        };
        $fiber = new \Fiber(fn () => $client->pool(['a' => ['POST', '/x', ['json' => $item]]]));
        $fiber->start();
        try {
            $client->get('/x', [], ['timout' => 1]);
        } catch (\ValueError $e) {
            $seen[] = $e->getMessage();
        }
        $fiber->resume();
        $this->assertCount(2, $seen);
        $this->assertStringStartsWith("option 'bogus': unknown option", $seen[0]);
        $this->assertStringStartsWith("option 'timout': unknown option", $seen[1], 'while the pool\'s fiber is suspended');

        // Outside a pool, and after one, the same errors say nothing more.
        try {
            $client->get('/x', [], ['timout' => 1]);
            $this->fail('accepted an unknown option');
        } catch (\ValueError $e) {
            $this->assertStringStartsWith("option 'timout': unknown option (known: ", $e->getMessage());
        }
    }

    public function testBadRequestOptionsAndArguments(): void
    {
        $client = $this->client($this->up->key('badreq'));
        $cases = [
            fn () => $client->request('GET', '/x', ['jsn' => []]),
            fn () => $client->request('POST', '/x', ['json' => [], 'body' => 'x']),
            fn () => $client->request('POST', '/x', ['idempotency_key' => '']),
            fn () => $client->request('GE T', '/x'),
            fn () => $client->request('GET', '/x', ['json' => NAN]),
            fn () => $client->pool(['a' => 'not a request']),
            // A non-empty $json with a body in the options: refused, not silently dropped.
            fn () => $client->post('/x', ['a' => 1], ['body' => 'raw']),
            fn () => $client->put('/x', ['a' => 1], ['form' => ['b' => 2]]),
            // Two different keys for one request: which one the server deduplicates by would be a guess.
            fn () => $client->post('/x', [], ['idempotency_key' => 'k-1', 'headers' => ['Idempotency-Key' => 'k-2']]),
        ];
        foreach ($cases as $i => $case) {
            try {
                $case();
                $this->fail("case $i: expected ValueError");
            } catch (\ValueError $e) {
                $this->assertMatchesRegularExpression("/option '|pool request 'a'/", $e->getMessage(), "case $i");
                if ($i === 4) {
                    $this->assertStringContainsString("option 'json': cannot be encoded as JSON (Inf and NaN cannot be JSON encoded)", $e->getMessage());
                }
            }
        }
        $this->expectException(\ValueError::class);
        $client->pool([['GET', '/x']], 0);
    }

    /**
     * A URL longer than any HTTP client or server takes (65,534 bytes) is refused before
     * anything is sent, also in a pool (where the other request must not keep its funnel slot).
     */
    public function testAnOverlongUrlIsRefusedBeforeAnythingIsSent(): void
    {
        $key = $this->up->key('longurl');
        $name = Run::name('longurl');
        $client = new Client($name, ['base_url' => $this->up->base($key), 'funnel' => ['limit' => 2]]);
        $long = ['ids' => implode(',', range(1, 12000))];
        foreach ([
            fn () => $client->get('/items', $long),
            fn () => $client->get('/' . str_repeat('p', 70000)),
            fn () => $client->pool(['big' => ['GET', '/?q=' . str_repeat('a', 70000)], 'ok' => ['GET', '/']]),
        ] as $i => $call) {
            try {
                $call();
                $this->fail("case $i: expected ValueError");
            } catch (\ValueError $e) {
                $this->assertMatchesRegularExpression("/option 'url': is \\d+ bytes long with its query; HTTP clients and servers take at most 65534/", $e->getMessage(), "case $i");
            }
        }
        $this->assertSame(0, (new \Resilient\Funnel($name, 2))->inFlight(), 'no slot kept');
        $this->assertCount(0, $this->up->attempts($key, 0), 'nothing was sent');
    }

    /** A NUL byte in a string option is named in a ValueError (written \0), not a generic \Error. */
    public function testANulByteInAnOptionIsAClearError(): void
    {
        foreach ([
            fn () => new Client('nul', ['verify' => "/tmp/a\0b"]),
            fn () => new Client('nul', ["time\0out" => 1]),
            fn () => $this->client($this->up->key('nul'))->get('/x', [], ['sink' => "/tmp/a\0b"]),
        ] as $i => $call) {
            try {
                $call();
                $this->fail("case $i: expected ValueError");
            } catch (\ValueError $e) {
                $this->assertTrue(str_contains($e->getMessage(), '\0') || str_contains($e->getMessage(), 'NUL byte'), "case $i: " . $e->getMessage());
                $this->assertStringStartsWith('option ', $e->getMessage(), "case $i");
            }
        }
    }

    public function testSecretsNeverReachMessages(): void
    {
        $client = new Client('secret', [
            'base_url' => 'http://user:hunter2@127.0.0.1:1',
            'headers' => ['Authorization' => 'Bearer hunter2'],
            'max_attempts' => 1,
        ]);
        try {
            $client->get('/x', ['api_key' => 'hunter2'], ['headers' => ['Cookie' => 'sid=hunter2']]);
            $this->fail('expected UpstreamFailed');
        } catch (\Resilient\UpstreamFailed $e) {
            $this->assertStringNotContainsString('hunter2', $e->getMessage());
            $this->assertStringContainsString('GET http://127.0.0.1:1/x: connect error', $e->getMessage());
        }
    }
}
