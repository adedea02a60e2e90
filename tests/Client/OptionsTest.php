<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Client;
use Resilient\Metrics;
use Resilient\Tests\Harness\Run;
use Resilient\Unavailable;

/**
 * Per-request `timeout` overrides the client's, and the new options refuse bad values
 * by name (`\ValueError`, or `\TypeError` for a wrong type) before anything is sent.
 */
final class OptionsTest extends ClientTestCase
{
    public function testAPerRequestTimeoutOverridesTheClients(): void
    {
        $key = $this->up->key('reqtimeout');
        $this->up->script($key, [['hang' => true, 'hang_ms' => 20_000]]);
        $client = $this->client($this->up->base($key), ['timeout' => 5, 'max_attempts' => 1]);
        $t = microtime(true);
        $e = self::thrown(fn () => $client->get('/hang', null, ['timeout' => 0.2]));
        $elapsed = microtime(true) - $t;
        $this->assertInstanceOf(Unavailable::class, $e, self::describe($e));
        $this->assertGreaterThanOrEqual(0.15, $elapsed);
        $this->assertLessThan(2.0, $elapsed, 'the request timeout (0.2 s), not the client timeout (5 s)');
        $rows = $this->up->attempts($key, 1);
        $this->assertCount(1, $rows);
        $this->assertSame('abandoned', $rows[0]['outcome'], 'the client left the hanging upstream');
        $this->assertLessThan(2000, $rows[0]['duration_ms']);
    }

    public function testAPerRequestConnectTimeoutIsAccepted(): void
    {
        $key = $this->up->key('reqconnect');
        $this->up->script($key, [['status' => 200]]);
        $r = $this->client($this->up->base($key), ['connect_timeout' => 3])->get('/x', null, ['connect_timeout' => 0.5, 'timeout' => 2]);
        $this->assertSame(200, $r->status());
    }

    /**
     * A value error or a type error (PHP's coercive rules decide which for a union such as
     * `bool|string`): either way refused up front, with the option named.
     *
     * @return array<string, array{array<string,mixed>, string}> options, option named
     */
    public static function badValues(): array
    {
        $dir = sys_get_temp_dir() . '/resilient-no-such-dir-' . getmypid();
        return [
            'verify int' => [['verify' => 5], 'verify'],
            'verify array' => [['verify' => ['a']], 'verify'],
            'proxy not a url' => [['proxy' => 'not a url'], 'proxy'],
            // Not built with SOCKS support: refused up front rather than failing every request.
            'proxy socks5' => [['proxy' => 'socks5://127.0.0.1:1080'], 'proxy'],
            'proxy unknown scheme key' => [['proxy' => ['ftp' => 'http://127.0.0.1:1']], 'proxy.ftp'],
            'proxy no not a list' => [['proxy' => ['http' => 'http://127.0.0.1:1', 'no' => 5]], 'proxy'],
            'redirects max -1' => [['allow_redirects' => ['max' => -1]], 'allow_redirects'],
            'redirects unknown key' => [['allow_redirects' => ['maximum' => 3]], 'allow_redirects.maximum'],
            'redirects protocols' => [['allow_redirects' => ['protocols' => ['gopher']]], 'allow_redirects'],
            'redirects string' => [['allow_redirects' => 'yes please'], 'allow_redirects'],
            'decode_content array' => [['decode_content' => ['gzip']], 'decode_content'],
            'cert not a string' => [['cert' => 42], 'cert'],
            'timeout negative' => [['timeout' => -1], 'timeout'],
            'sink in a missing dir' => [['sink' => "$dir/out.bin"], 'sink'],
            'sink a directory' => [['sink' => sys_get_temp_dir()], 'sink'],
            'multipart not a list' => [['multipart' => 'field=1'], 'multipart'],
            'multipart part without name' => [['multipart' => [['contents' => 'x']]], 'multipart'],
        ];
    }

    /** @dataProvider badValues */
    public function testABadValueIsRefusedNamingTheOption(array $options, string $option): void
    {
        $key = $this->up->key('badopt');
        $perRequestOnly = in_array($option, ['sink', 'multipart'], true);
        // Option path as the messages spell it: `option 'allow_redirects.maximum': ...`.
        if (!$perRequestOnly) {
            $e = self::thrown(fn () => new Client('badopt', ['base_url' => $this->up->base($key)] + $options));
            $this->assertRefusal($e, $option);
            $this->assertStringContainsString("option '$option", $e->getMessage());
            $byValidator = self::thrown(fn () => Client::validator('badopt', ['base_url' => $this->up->base($key)] + $options));
            $this->assertSame(self::describe($e), self::describe($byValidator), 'Client::validator() refuses it alike');
        }
        $client = $this->client($this->up->base($key));
        $e = self::thrown(fn () => $client->request('POST', '/x', $options));
        $this->assertRefusal($e, $option, 'per request: ');
        $byValidator = self::thrown(fn () => Client::validator('badopt', ['base_url' => $this->up->base($key)])->validateRequest('POST', '/x', $options));
        $this->assertSame(self::describe($e), self::describe($byValidator), 'validateRequest() refuses it alike');
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');
    }

    /**
     * `Client::validator()` (for test doubles) checks calls as the client does, sends nothing,
     * and makes no entry for its name in the host's segment, even with a funnel and a budget.
     */
    public function testAValidatorChecksCallsSendsNoneAndLeavesTheSegmentAlone(): void
    {
        $key = $this->up->key('validator');
        $name = Run::name('validator');
        $v = Client::validator($name, [
            'base_url' => $this->up->base($key),
            'funnel' => ['limit' => 2],
            'budget' => ['ratio' => 0.1],
            'circuit' => ['failure_ratio' => 0.5],
        ]);
        $v->validateRequest('GET', '/ok', ['query' => ['a' => 1]]);
        $e = self::thrown(fn () => $v->validateRequest('GET', '/x', ['jsn' => []]));
        $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
        $this->assertStringContainsString("'jsn'", $e->getMessage());
        foreach ([
            'get' => fn () => $v->get('/x'),
            'request' => fn () => $v->request('POST', '/x'),
            'pool' => fn () => $v->pool(['a' => ['GET', '/x']]),
        ] as $what => $send) {
            $e = self::thrown($send);
            $this->assertInstanceOf(\LogicException::class, $e, "$what: " . self::describe($e));
            $this->assertStringContainsString('Client::validator()', $e->getMessage());
        }
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');
        $this->assertArrayNotHasKey($name, Metrics::snapshot());
        $this->assertFalse(Metrics::reset($name), 'no metrics entry was made');
    }

    private function assertRefusal(\Throwable $e, string $option, string $where = ''): void
    {
        $this->assertTrue(
            $e instanceof \ValueError || $e instanceof \TypeError || $e instanceof \InvalidArgumentException,
            $where . self::describe($e),
        );
        $this->assertStringContainsString("'$option", $e->getMessage());
        if (!str_contains($option, '.')) {
            // The option is known; its value is what is wrong.
            $this->assertStringNotContainsString('unknown option', $e->getMessage());
        }
    }
}
