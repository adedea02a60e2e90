<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Support\Facades\Http;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\Testing\RecordedRequest;
use Resilient\Response;
use Resilient\Tests\Harness\PhpProcess;

/**
 * `Resilient::fake()` refuses what the real client refuses, with the same exception: a test that
 * passes under the fake must not hide a call that throws in production. Nothing here is sent:
 * the real client throws before sending too (measured at the upstream).
 */
final class FakeValidationTest extends PackageTestCase
{
    /** @return array<string, \Closure(object): mixed> calls the real client refuses */
    private static function mistakes(): array
    {
        return [
            'a misspelt option' => fn ($c) => $c->get('/echo', null, ['timout' => 3]),
            'a $json argument beside option json' => fn ($c) => $c->post('/echo', ['a' => 1], ['json' => ['b' => 2]]),
            'a $json argument beside option form' => fn ($c) => $c->put('/echo', ['a' => 1], ['form' => ['b' => 2]]),
            'not a method' => fn ($c) => $c->request('FETCH ME', '/echo'),
            'CONNECT' => fn ($c) => $c->request('connect', '/echo'),
            'headers as a string' => fn ($c) => $c->get('/echo', null, ['headers' => 'X-A: b']),
            'a line break in a header' => fn ($c) => $c->get('/echo', null, ['headers' => ['X-A' => "a\r\nX-B: c"]]),
            'a timeout that is no number' => fn ($c) => $c->get('/echo', null, ['timeout' => 'abc']),
            'option query as a string beside a $query argument' => fn ($c) => $c->get('/echo', ['a' => 1], ['query' => 'b=2']),
            "Guzzle's options as the query" => fn ($c) => $c->get('/echo', ['headers' => ['Authorization' => 'Bearer t']]),
            "Guzzle's options as the query of a HEAD" => fn ($c) => $c->head('/echo', ['auth' => ['u', 'p']]),
            'verify as a number' => fn ($c) => $c->delete('/echo', null, ['verify' => 123]),
            'a URL of another scheme' => fn ($c) => $c->get('ftp://example.com/x'),
            'a pool item without a path' => fn ($c) => $c->pool(['a' => ['GET']]),
            'a pool item with named keys' => fn ($c) => $c->pool(['a' => ['method' => 'GET', 'path' => '/x']]),
            'a pool item with options that are no array' => fn ($c) => $c->pool(['a' => ['GET', '/x', 'nope']]),
            'a pool item of four' => fn ($c) => $c->pool([['GET', '/x', null, 1]]),
            'a pool item with its options under a key' => fn ($c) => $c->pool(['a' => ['POST', '/x', 'options' => ['json' => []]]]),
            'a pool item with its options at index 3' => fn ($c) => $c->pool(['a' => [0 => 'POST', 1 => '/x', 3 => ['json' => []]]]),
            'a pool item with a bad method, after a good one' => fn ($c) => $c->pool(['ok' => ['GET', '/x'], 'b' => ['FETCH ME', '/x']]),
            'a pool item with a misspelt option' => fn ($c) => $c->pool(['a' => ['GET', '/x', ['timout' => 1]]]),
            // Keys that carry secrets show as the real pool shows them.
            'a pool item keyed by a URL with credentials' => fn ($c) => $c->pool(['HTTP://u:pw@Example.com:8080/x?t=1' => ['GET']]),
            'a pool item keyed by a path with a query' => fn ($c) => $c->pool(['/x?token=t' => ['GET', '/x', ['timout' => 1]]]),
            'a pool item keyed by a long label' => fn ($c) => $c->pool([str_repeat('é', 70) => ['GET']]),
            'a pool item with an option of the wrong type' => fn ($c) => $c->pool(['a' => ['GET', '/x', ['timeout' => []]]]),
            'a pool item with a URL too long' => fn ($c) => $c->pool(['long' => ['GET', '/x', ['query' => ['q' => str_repeat('a', 70_000)]]]]),
            'a pool concurrency of 0' => fn ($c) => $c->pool([['GET', '/x']], 0),
            // call_user_func() calls in PHP's coercive mode, as a file without strict_types does.
            'a pool concurrency of 5.5, from coercive code' => fn ($c) => call_user_func([$c, 'pool'], [['GET', '/x']], 5.5),
            'a pool concurrency of true, from coercive code' => fn ($c) => call_user_func([$c, 'pool'], [['GET', '/x']], true),
            "a pool concurrency of '2.5', from coercive code" => fn ($c) => call_user_func([$c, 'pool'], [['GET', '/x']], '2.5'),
        ];
    }

    public function testTheFakeRefusesWhatTheRealClientRefusesWithTheSameException(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-validate', ['max_attempts' => 1]);
        $this->boot(['clients' => [$name => $client]]);
        $real = [];
        foreach (self::mistakes() as $what => $call) {
            $real[$what] = self::thrown(fn () => $call(Resilient::client($name)));
        }
        Resilient::fake([$name => Response::fake(200, 'fake')]);
        foreach (self::mistakes() as $what => $call) {
            $this->assertNotSame('returned', $real[$what], "the real client accepted: $what");
            $this->assertSame($real[$what], self::thrown(fn () => $call(Resilient::client($name))), $what);
        }
        Resilient::assertNothingSent();
        $this->assertSame([], $this->up->attempts($key, 0, 200), 'nothing was sent');

        // What the real client accepts is answered from the script, as before.
        $this->assertSame('fake', Resilient::client($name)->get('/echo', ['a' => 1], ['query' => ['b' => 2]])->body());
        $this->assertSame('fake', Resilient::client($name)->post('/echo', [], ['json' => ['b' => 2]])->body());
        $this->assertSame('fake', Resilient::client($name)->request(' patch ', '/echo', ['form' => ['c' => 3]])->body());
        $this->assertSame(['ok'], array_keys(Resilient::client($name)->pool(['ok' => ['GET', '/x', null]])));
        foreach (['5', 5.0, '1e1'] as $concurrency) {   // accepted by the real client too
            $this->assertSame(['ok'], array_keys(call_user_func([Resilient::client($name), 'pool'], ['ok' => ['GET', '/x']], $concurrency)));
        }
        Resilient::assertSent(fn (RecordedRequest $r) => $r->method() === 'GET' && $r->query() === ['a' => 1, 'b' => 2]);
        Resilient::assertSent(fn (RecordedRequest $r) => $r->method() === 'PATCH' && $r->data() === ['c' => 3]);
        Resilient::assertSentCount(7);
    }

    /** Through `Http::resilient()` too: the bridge sends through the fake, which checks the call. */
    public function testTheBridgeUnderTheFakeRefusesAnOptionValueTheRealClientRefuses(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-validate-bridge', ['max_attempts' => 1]);
        $this->boot(['clients' => [$name => $client]]);
        $call = fn () => Http::resilient($name)->withOptions(['verify' => 123])->get('/echo');
        $real = self::thrown($call);
        Resilient::fake();
        $this->assertStringStartsWith('TypeError: ', $real);
        $this->assertSame($real, self::thrown($call));
        Resilient::assertNothingSent();
        $this->assertSame([], $this->up->attempts($key, 0, 200));
    }

    /** A client whose config the extension refuses throws under the fake as in production. */
    public function testAClientWhoseConfigIsRefusedThrowsUnderTheFakeToo(): void
    {
        [$name, , $client] = $this->upstreamClient('fake-validate-config', ['timeout' => 'abc']);
        $this->boot(['clients' => [$name => $client]]);
        $real = self::thrown(fn () => Resilient::client($name));
        $this->assertStringContainsString("resilient.clients.$name: ", $real);
        Resilient::fake([$name => Response::fake(200)]);
        $this->assertSame($real, self::thrown(fn () => Resilient::client($name)->get('/x')));
        Resilient::assertNothingSent();
    }

    /**
     * What a test host lacks does not break the fake: a base URL from an unset `env()`, the CA,
     * certificate and key files of production, a Redis backend.
     */
    public function testAProductionConfigIsCheckedWithoutWhatTheTestHostLacks(): void
    {
        $name = 'fake-validate-prod-' . getmypid();
        $this->boot(['clients' => [$name => [
            'base_url' => null,
            'verify' => '/nonexistent/prod-ca.pem',
            'cert' => '/nonexistent/client.pem',
            'backend' => 'redis://127.0.0.1:1/0',
            'funnel' => ['limit' => 2],
        ]]]);
        Resilient::fake([$name => Response::fake(200, 'ok')]);
        $this->assertSame('ok', Resilient::client($name)->get('/rates')->body());
        $this->assertStringStartsWith(
            "ValueError: option 'timout': unknown option",
            self::thrown(fn () => Resilient::client($name)->get('/rates', null, ['timout' => 3])),
        );
        $this->assertSame(0, (new \Resilient\Funnel($name, 2))->inFlight(), 'the checker took no slot');
    }

    /**
     * A funnel, budget or breaker that production refuses is refused under the fake too, with
     * the same exception (before, the fake left the guards out: a reserve over the limit, or a
     * limit from an `env()` without a default, passed every test and threw in production).
     */
    public function testTheGuardsAreCheckedAsProductionChecksThem(): void
    {
        $refused = [
            'funnel' => [['limit' => 3, 'reserve' => 5], "option 'funnel.reserve': must be between 0 and limit - 1 (2), got 5"],
            'budget' => [['ratio' => -1], "option 'budget.ratio': must be a finite number >= 0, got -1"],
            'circuit' => [['failure_ratio' => 2], "option 'circuit.failure_ratio': must be greater than 0 and at most 1, got 2"],
            'funnel of an unset env()' => [['limit' => null, 'reserve' => 1], "option 'funnel.limit': is required"],
        ];
        foreach ($refused as $guard => [$value, $message]) {
            $name = 'fake-validate-' . count($refused) . '-' . getmypid() . '-' . bin2hex(random_bytes(2));
            $this->boot(['clients' => [$name => ['base_url' => 'http://localhost', strtok($guard, ' ') => $value]]]);
            $real = self::thrown(fn () => Resilient::client($name));
            $this->assertStringContainsString($message, $real);
            Resilient::fake([$name => Response::fake(200)]);
            $this->assertSame($real, self::thrown(fn () => Resilient::client($name)->get('/x')), $guard);
            Resilient::assertNothingSent();
        }
    }

    /** Checking a call leaves a multipart part's stream where it was: the test may still read it. */
    public function testCheckingLeavesAMultipartStreamWhereItWas(): void
    {
        $this->boot([]);
        Resilient::fake(['only-faked' => Response::fake(200)]);   // scripted: no config needed
        $s = fopen('php://memory', 'r+');
        fwrite($s, 'csv');
        rewind($s);
        Resilient::client('only-faked')->post('/upload', null, ['multipart' => [['name' => 'f', 'contents' => $s]]]);
        $this->assertSame(0, ftell($s));
        $this->assertSame('csv', stream_get_contents($s));
    }

    /** A name only faked (no config) has its method and options checked; any path is taken. */
    public function testANameWithoutConfigHasItsCallChecked(): void
    {
        $this->boot([]);
        Resilient::fake(['only-faked' => Response::fake(200)]);   // scripted: no config needed
        $this->assertSame(200, Resilient::client('only-faked')->get('relative/path', ['a' => 1])->status());
        $this->assertStringStartsWith(
            "ValueError: option 'timout': unknown option",
            self::thrown(fn () => Resilient::client('only-faked')->get('/x', null, ['timout' => 3])),
        );
        $this->assertSame(
            "ValueError: option 'method': is not a valid HTTP method",
            self::thrown(fn () => Resilient::client('only-faked')->request('FETCH ME', '/x')),
        );
        Resilient::assertSentCount(1);
    }

    /** Without the extension nothing checks the call (its scripted answer comes back as before). */
    public function testWithoutTheExtensionTheFakeDoesNotCheck(): void
    {
        $code = self::childApp([]) . <<<'PHP'
            Resilient\Laravel\Facades\Resilient::fake(['x' => new LogicException('scripted')]);
            try {
                Resilient\Laravel\Facades\Resilient::client('x')->get('/x', null, ['timout' => 3]);
            } catch (Throwable $e) {
                echo get_class($e), ': ', $e->getMessage(), "\n";
            }
            PHP;
        $result = PhpProcess::code($code, [], ['RESILIENT_SO' => '/nonexistent/resilient.so'])->wait(20);
        $this->assertSame("LogicException: scripted\n", $result->stdout, $result->describe());
    }

    /**
     * Without the extension a fake cannot answer with a Resilient\\Response (the extension's
     * class): a call it would answer so says how to install the extension, as the real client
     * does, not "class Resilient\\Response not found".
     */
    public function testWithoutTheExtensionAFakeResponseSaysHowToInstallIt(): void
    {
        $setup = self::childApp(['clients' => ['up' => ['base_url' => 'http://127.0.0.1:9']]]) . <<<'PHP'
            require_once '/usr/share/php/GuzzleHttp/autoload.php';
            $app->boot();
            Resilient\Laravel\Facades\Resilient::fake();
            PHP;
        $this->assertEachSaysHowToInstall($setup, <<<'PHP'
            fn () => Resilient\Laravel\Facades\Resilient::client('up')->get('/ok'),
            fn () => Illuminate\Support\Facades\Http::resilient('up')->get('/ok'),
            PHP, 2);
    }

    /** "Class: message" of what $call throws, or 'returned'. */
    private static function thrown(\Closure $call): string
    {
        try {
            $call();

            return 'returned';
        } catch (\Throwable $e) {
            return get_class($e) . ': ' . $e->getMessage();
        }
    }
}
