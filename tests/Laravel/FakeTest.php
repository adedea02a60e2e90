<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Support\Facades\Http;
use PHPUnit\Framework\AssertionFailedError;
use Resilient\BudgetExhausted;
use Resilient\FunnelFull;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\Testing\ClientFake;
use Resilient\Laravel\Testing\RecordedRequest;
use Resilient\Laravel\Testing\StrayRequest;
use Resilient\Metrics;
use Resilient\Response;
use Resilient\Tests\Harness\Run;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * `Resilient::fake()`: named clients answer from a script, every call is recorded for the
 * assertions, and nothing reaches the upstream (measured there) or the shared budget.
 */
final class FakeTest extends PackageTestCase
{
    public function testScriptedAnswerThenRefusalReachTheCodeUnderTestAndTheUpstreamSeesNothing(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-script');
        $this->up->script($key, [['status' => 500]]);
        $this->boot(['clients' => [$name => $client]]);
        $originals = Resilient::budget($name)->stats()['originals'];
        Resilient::fake([$name => [Response::fake(200, '{"price":42}'), new FunnelFull('x')]]);
        $quotes = new QuoteService($name);

        $this->assertSame('price 42', $quotes->quote('10110'));
        $this->assertSame('fallback after FunnelFull', $quotes->quote('10120'));

        Resilient::assertSentCount(2);
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $r->client() === $name
            && $r->method() === 'GET'
            && $r->url() === $this->up->base($key) . '/quote'
            && $r->query() === ['postcode' => '10110']
            && $r->header('X-Shop') === 'main'
            && $outcome instanceof Response);
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $r->query() === ['postcode' => '10120'] && $outcome instanceof FunnelFull);
        Resilient::assertNotSent(fn (RecordedRequest $r) => $r->method() === 'POST');
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'the upstream saw nothing');
        $this->assertSame($originals, Resilient::budget($name)->stats()['originals'], 'no budget deposit');
    }

    public function testTheClientsFallbackAnswersAScriptedRefusalAsTheRealClientWould(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-fallback');
        $seen = [];
        $client['fallback'] = function (Unavailable $e) use (&$seen) {
            $seen[] = $e;

            return ['qty' => 3, 'is_live' => false];
        };
        $this->boot(['clients' => [$name => $client]]);
        $refusal = new BudgetExhausted('no retry left');
        Resilient::fake([$name => [Response::fake(200, '{"qty":7}'), $refusal]]);

        $live = Resilient::client($name)->get('/stock/1');
        $this->assertInstanceOf(Response::class, $live, 'a scripted answer is returned as is');
        $this->assertSame(['qty' => 3, 'is_live' => false], Resilient::client($name)->get('/stock/1'));
        $this->assertSame([$refusal], $seen, 'the fallback got the scripted exception, once');
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $outcome === $refusal);
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'the upstream saw nothing');
    }

    /**
     * A scripted answer is a call's outcome. The real client never returns a status in its
     * `retry_on`: it retries it, and when the attempts run out throws `UpstreamFailed` with that
     * response. So does the fake (a test could otherwise pass over `if ($r->status() === 503)`,
     * code that production never reaches); a status not in `retry_on` is returned.
     */
    public function testAScriptedStatusTheClientRetriesIsThrownAsTheRealClientThrowsItOnceItsAttemptsRunOut(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-retry-on');
        $fallbacks = [];
        $this->boot(['clients' => [
            $name => $client,
            "$name-500" => $client + ['retry_on' => [500]],
            "$name-fb" => $client + ['fallback' => function (Unavailable $e) use (&$fallbacks) {
                $fallbacks[] = $e;

                return 'cached';
            }],
        ]]);
        $busy = Response::fake(503, 'busy', ['Retry-After' => '120']);
        Resilient::fake([
            $name => [$busy, Response::fake(500, 'oops'), Response::fake(429)],
            "$name-500" => [Response::fake(503), Response::fake(500)],
            "$name-fb" => Response::fake(503),
        ]);

        try {
            Resilient::client($name)->get('/quote', ['postcode' => '10110']);
            $this->fail('a 503 in the default retry_on returned');
        } catch (UpstreamFailed $e) {
            $this->assertSame(503, $e->getCode());
            $this->assertSame($busy, $e->response(), 'the scripted response, body and headers');
            $this->assertNull($e->failure());
            $this->assertStringContainsString("GET {$this->up->base($key)}/quote: status 503", $e->getMessage());
            $this->assertStringContainsString('retry_on', $e->getMessage());
            $this->assertStringNotContainsString('10110', $e->getMessage(), 'no query in the message, as the real one');
        }
        $this->assertSame(500, Resilient::client($name)->get('/x')->status(), '500 is not in the default retry_on');
        $this->assertInstanceOf(UpstreamFailed::class, Resilient::client($name)->pool(['a' => ['GET', '/y']])['a'], 'a 429: a value in a pool');
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $r->query() === ['postcode' => '10110']
            && $outcome instanceof UpstreamFailed && $outcome->response() === $busy);

        $this->assertSame(503, Resilient::client("$name-500")->get('/x')->status(), 'its retry_on is [500]');
        try {
            Resilient::client("$name-500")->get('/x');
            $this->fail('a 500 in retry_on [500] returned');
        } catch (UpstreamFailed $e) {
            $this->assertSame(500, $e->getCode());
        }
        Resilient::fake([$name => $busy]);
        $laravel = Http::resilient($name)->get('/q');
        $this->assertSame([503, 'busy', '120'], [$laravel->status(), $laravel->body(), $laravel->header('Retry-After')],
            "through Http::resilient() the response, as when the real client's retries ran out on it");
        $this->assertSame('cached', Resilient::client("$name-fb")->get('/x'), "the client's fallback answers it");
        $this->assertCount(1, $fallbacks);
        $this->assertSame(503, $fallbacks[0]->getCode());
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'the upstream saw nothing');
    }

    public function testAStrayCallThrowsUnderPreventStrayRequests(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-stray');
        $this->up->script($key, [['status' => 200]]);
        $this->boot(['clients' => [$name => $client, 'other' => $client]]);
        Resilient::fake([$name => [Response::fake(204)]]);
        Resilient::preventStrayRequests();

        $this->assertSame(204, Resilient::client($name)->post('/orders', ['sku' => 1])->status());
        foreach ([
            [fn () => Resilient::client($name)->post('/orders?token=s3cret', ['sku' => 2]), '"' . $name . '" (POST ' . $this->up->base($key) . '/orders): its script in Resilient::fake() has 1 answer(s) and all were used'],
            [fn () => Resilient::client('other')->get('/x'), '"other" (GET ' . $this->up->base($key) . '/x): no script for this name'],
            // An absolute URL with user-info: the password is never shown.
            [fn () => Resilient::client('other')->get('https://apiuser:s3cret@billing.example/p'), '"other" (GET https://billing.example/p): no script for this name'],
            // A password with an '@' in it: the user-info ends at the last '@', as the client reads it.
            [fn () => Resilient::client('other')->get('https://apiuser:s3cr@s3cret@billing.example/p'), '"other" (GET https://billing.example/p): no script for this name'],
        ] as [$call, $message]) {
            try {
                $call();
                $this->fail('a stray call went through');
            } catch (StrayRequest $e) {
                $this->assertStringContainsString($message, $e->getMessage());
                $this->assertStringNotContainsString('s3cret', $e->getMessage());
            }
        }
        Resilient::assertSentCount(1);
        $this->assertSame([], $this->up->attempts($key, 0, 300));
    }

    /**
     * A list of answers that has run out throws, with or without preventStrayRequests(), as
     * Laravel's Http::sequence() does at its end: the script said how many calls there are, and
     * one more (a POST, say) must not reach the real upstream. Before, it went through.
     */
    public function testACallPastTheEndOfAListThrowsAndReachesNothing(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-list-end');
        $this->up->script($key, [['status' => 200, 'body' => 'real']]);
        $this->boot(['clients' => [$name => $client]]);
        Resilient::fake([$name => [Response::fake(200, 'one'), Response::fake(200, 'two')]]);

        $this->assertSame('one', Resilient::client($name)->post('/orders', ['sku' => 1])->body());
        $this->assertSame('two', Resilient::client($name)->post('/orders', ['sku' => 2])->body());
        try {
            Resilient::client($name)->post('/orders', ['sku' => 3]);
            $this->fail('a call past the end of the list went through');
        } catch (StrayRequest $e) {
            $this->assertStringContainsString('"' . $name . '" (POST ' . $this->up->base($key) . '/orders): its script in Resilient::fake() has 2 answer(s) and all were used', $e->getMessage());
        }
        try {
            Http::resilient($name)->post('/orders', ['sku' => 4]);
            $this->fail('a call past the end of the list went through Http::resilient()');
        } catch (StrayRequest $e) {
            $this->assertStringContainsString('has 2 answer(s) and all were used', $e->getMessage());
        }
        Resilient::assertSentCount(2);
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'the upstream saw nothing');
    }

    public function testWithoutPreventionAnUnscriptedCallReachesTheRealClientAndIsRecorded(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-through');
        $this->up->script($key, [['status' => 200, 'body' => 'real']]);
        $this->boot(['clients' => [$name => $client]]);
        Resilient::fake(['someone-else' => Response::fake(200)]);

        $this->assertSame('real', Resilient::client($name)->get('/live')->body());
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $r->path() === '/live' && $outcome->body() === 'real');
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    /**
     * The recorded URL and query are the ones the real client sends, also when `base_url` has a
     * query of its own (an API version): before, the base's query was left in the middle of the
     * URL (`/api?v=2/quote`) and out of query().
     */
    public function testTheRecordedUrlAndQueryAreTheOnesTheRealClientSends(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-base-query');
        $this->up->script($key, [['status' => 200]], 'echo');
        foreach (['/api/?v=2', '/api?v=2#frag', '/api/'] as $base) {
            $this->boot(['clients' => [$name => ['base_url' => $client['base_url'] . $base] + $client]]);
            Resilient::fake(['someone-else' => Response::fake(200)]);   // $name's calls reach the real client
            foreach (['/quote', 'quote?x=1', '', '?x=1', '/q#frag?x=1', 'q?y=2#frag'] as $path) {
                $sent = Resilient::client($name)->get($path, ['postcode' => '10110'])->url();
                parse_str((string) parse_url($sent, PHP_URL_QUERY), $query);
                Resilient::assertSent(fn (RecordedRequest $r) => $r->path() === $path
                    && $r->url() === strtok($sent, '?')
                    && $r->query() === $query, "$base + '$path': sent $sent");
            }
        }
    }

    /**
     * What the recording says was sent is what the client sends: the configured `headers` and
     * `user_agent` (a call's own header replaces one), a `query` of false as no query, the
     * options' body when the verb's `$json` argument is empty (the client ignores an empty one).
     */
    public function testTheRecordingHoldsWhatTheClientSendsForEdgeCases(): void
    {
        $name = Run::name('fake-recorded');
        $this->boot(['clients' => [$name => [
            'base_url' => 'http://127.0.0.1:9/api',
            'headers' => ['X-Api-Key' => 'k1', 'X-Shop' => 'main'],
            'user_agent' => 'shop/1.0',
        ]]]);
        Resilient::fake([$name => Response::fake(200)]);
        $client = Resilient::client($name);

        $client->get('/a', ['a' => 1], ['query' => false, 'headers' => ['x-shop' => 'other']]);
        $client->post('/b', [], ['json' => ['x' => 1]]);
        $client->put('/c', [], ['form' => ['u' => 'me']]);

        [[$get], [$post], [$put]] = Resilient::recorded();
        $this->assertSame(['a' => 1], $get->query());
        $this->assertSame(['k1', 'other', 'shop/1.0'], [$get->header('X-Api-Key'), $get->header('X-Shop'), $get->header('User-Agent')]);
        $this->assertSame(['x-api-key' => ['k1'], 'x-shop' => ['other'], 'user-agent' => ['shop/1.0']], $get->headers());
        $this->assertSame([['x' => 1], ['x' => 1]], [$post->json(), $post->data()]);
        $this->assertSame(['u' => 'me'], $put->data());
        $this->assertNull($put->json());
    }

    /**
     * The recorded Content-Type is the one the real client sends (measured at the upstream): a
     * JSON, form or multipart body's replaces a configured one, a raw `body` or no body keeps
     * it, a call's own header wins over both. Before, the configured one was recorded for a
     * JSON or form body, so an assertion on it passed for a request production never sends.
     */
    public function testTheRecordedContentTypeIsTheOneTheClientSends(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-content-type', ['headers' => ['Content-Type' => 'application/xml']]);
        $this->up->script($key, [['status' => 200]]);
        $this->boot(['clients' => [$name => $client]]);
        $calls = [
            'a $json argument' => fn ($c) => $c->post('/json-argument', ['a' => 1]),
            'option json' => fn ($c) => $c->put('/json-option', [], ['json' => ['a' => 1]]),
            'option form' => fn ($c) => $c->post('/form', null, ['form' => ['a' => '1']]),
            'option multipart' => fn ($c) => $c->post('/multipart', null, ['multipart' => [['name' => 'a', 'contents' => 'x']]]),
            'a raw body' => fn ($c) => $c->post('/raw', null, ['body' => '<a/>']),
            'no body' => fn ($c) => $c->get('/none'),
            "the call's own header" => fn ($c) => $c->patch('/own', ['a' => 1], ['headers' => ['content-type' => 'application/merge-patch+json']]),
        ];
        foreach ($calls as $call) {
            $call(Resilient::client($name));
        }
        $sent = array_column($this->up->attempts($key, count($calls)), 'headers');
        Resilient::fake([$name => Response::fake(200)]);
        foreach ($calls as $call) {
            $call(Resilient::client($name));
        }
        $recorded = array_column(Resilient::recorded(), 0);
        $this->assertCount(count($calls), $recorded);
        foreach (array_keys($calls) as $i => $how) {
            // The multipart boundary is the client's, chosen as it sends.
            $real = preg_replace('/; boundary=.*$/', '', $sent[$i]['content-type']);
            $this->assertSame($real, $recorded[$i]->header('Content-Type'), $how);
            $this->assertSame([$real], $recorded[$i]->headers()['content-type'], $how);
        }
        $this->assertSame('application/json', $recorded[0]->header('Content-Type'), 'not the configured application/xml');
        $this->assertSame('application/xml', $recorded[4]->header('Content-Type'));
    }

    public function testAStrayCallThatTheRealClientCannotServeGetsTheClientsFallback(): void
    {
        [$name, $key, $client] = $this->upstreamClient('fake-stray-fallback');
        $this->up->script($key, array_fill(0, 10, ['status' => 503]));
        $seen = [];
        $client['fallback'] = function (Unavailable $e) use (&$seen) {
            $seen[] = $e;

            return ['qty' => 0, 'is_live' => false];
        };
        $this->boot(['clients' => [$name => $client]]);
        Resilient::fake(['someone-else' => Response::fake(200)]);

        $this->assertSame(['qty' => 0, 'is_live' => false], Resilient::client($name)->get('/stock/2'));
        $this->assertCount(1, $seen, 'the fallback ran once, with the real call\'s Unavailable');
        $this->assertInstanceOf(UpstreamFailed::class, $seen[0]);
        $this->assertSame(503, $seen[0]->getCode());
        Resilient::assertSent(fn (RecordedRequest $r, $outcome) => $r->path() === '/stock/2' && $outcome === $seen[0]);
        $this->assertNotEmpty($this->up->attempts($key, 1), 'the stray call reached the upstream');
    }

    public function testScriptsMayRepeatOneAnswerOrComputeIt(): void
    {
        $this->boot([]);
        Resilient::fake([
            'always' => Response::fake(200, 'same'),
            'echo' => fn (RecordedRequest $r) => $r->json() === ['fail' => true]
                ? new BudgetExhausted('spent')
                : Response::fake(201, json_encode($r->json())),
        ]);
        $this->assertSame(['same', 'same'], [Resilient::client('always')->get('/a')->body(), Resilient::client('always')->get('/b')->body()]);
        $this->assertSame('{"n":1}', Resilient::client('echo')->put('/x', ['n' => 1])->body());
        $this->expectException(BudgetExhausted::class);
        Resilient::client('echo')->put('/x', ['fail' => true]);
    }

    public function testFakeWithoutScriptsAnswersEveryConfiguredName200(): void
    {
        $this->boot(['clients' => ['anything' => ['base_url' => 'https://api.example']]]);
        Resilient::fake();
        $client = Resilient::client('anything');
        $this->assertInstanceOf(ClientFake::class, $client);
        $this->assertSame('anything', $client->name());
        $this->assertSame(200, $client->head('/x')->status());
        $this->assertSame(0, $client->delete('/x')->attempts(), 'a fake answer made no attempt');
        Resilient::assertSentCount(2);
    }

    /**
     * A misspelt name fails under the fake as it fails in production and under Http::fake():
     * answered 200 before, a feature test passed over code that throws when deployed. A name
     * the fake scripts needs no config entry.
     */
    public function testANameNeitherConfiguredNorScriptedFailsUnderTheFakeAsInProduction(): void
    {
        $this->boot(['clients' => ['shipping' => ['base_url' => 'https://ship.example']]]);
        Resilient::fake();
        foreach ([fn () => Resilient::client('shiping'), fn () => Http::resilient('shiping')] as $call) {
            try {
                $call();
                $this->fail('a misspelt name was answered');
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString('shiping', $e->getMessage());
            }
        }
        Resilient::fake(['scripted-only' => Response::fake(201)]);
        $this->assertSame(201, Resilient::client('scripted-only')->get('/x')->status());
        $this->assertSame(201, Http::resilient('scripted-only')->get('https://elsewhere.example/x')->status());
    }

    /** Under the fake too, a client's entry changed at run time (a tenancy bootstrapper) is the one calls use. */
    public function testUnderTheFakeACallUsesTheClientsEntryAsItIsNow(): void
    {
        $this->boot(['clients' => ['tenant' => ['base_url' => 'https://a.example']]]);
        Resilient::fake();
        Resilient::client('tenant')->get('/one');
        config(['resilient.clients.tenant.base_url' => 'https://b.example']);
        Resilient::client('tenant')->get('/two');
        $urls = array_map(fn (array $r) => $r[0]->url(), Resilient::recorded());
        $this->assertSame(['https://a.example/one', 'https://b.example/two'], $urls);
    }

    /**
     * A faked name makes no entry in the host's segment (the test host's, often the
     * developer's default path): before, each name checked its calls through a client built
     * on the segment, so its metrics and budget were made there, and a suite faking a few
     * hundred names filled the table, failing later runs' real clients.
     */
    public function testAFakedNameLeavesTheHostsSegmentAlone(): void
    {
        $configured = Run::name('fake-configured');
        $this->boot(['clients' => [$configured => ['base_url' => 'http://127.0.0.1:9/', 'funnel' => ['limit' => 2]]]]);
        $unconfigured = Run::name('fake-unconfigured');
        Resilient::fake();                                               // every configured name
        Resilient::fake([$unconfigured => Response::fake(200)]);         // and a scripted one

        Resilient::client($configured)->get('/a');
        Resilient::client($unconfigured)->post('/b', ['x' => 1]);
        Resilient::client($configured)->pool(['p' => ['GET', '/c']]);

        Resilient::assertSentCount(3);
        $names = array_keys(Metrics::snapshot());
        $this->assertNotContains($configured, $names);
        $this->assertNotContains($unconfigured, $names);
        $this->assertFalse(Metrics::reset($configured), 'no metrics entry was made');
    }

    public function testPoolAnswersInOrderAndReturnsRefusalsAsValues(): void
    {
        $this->boot([]);
        Resilient::fake(['sku' => [Response::fake(200, 'one'), new FunnelFull('full'), Response::fake(404)]]);
        $out = Resilient::client('sku')->pool([
            'a' => ['GET', '/sku/1'],
            'b' => ['POST', '/sku/2', ['json' => ['q' => 1], 'idempotency_key' => 'k2']],
            'c' => ['GET', '/sku/3'],
        ], concurrency: 2);
        $this->assertSame(['a', 'b', 'c'], array_keys($out));
        $this->assertSame('one', $out['a']->body());
        $this->assertInstanceOf(Unavailable::class, $out['b']);
        $this->assertSame(404, $out['c']->status());
        Resilient::assertSent(fn (RecordedRequest $r) => $r->json() === ['q' => 1] && $r->header('Idempotency-Key') === 'k2');
        // A null concurrency is the real client's default, as its signature allows.
        Resilient::fake(['again' => Response::fake(200, 'x')]);
        $this->assertSame('x', Resilient::client('again')->pool(['x' => ['GET', '/sku/4']], null)['x']->body());
    }

    public function testAssertionsFailWhenTheyShould(): void
    {
        $this->boot([]);
        Resilient::fake(['s' => Response::fake(200)]);
        Resilient::assertNothingSent();
        Resilient::client('s')->get('/x');
        foreach ([
            fn () => Resilient::assertNothingSent(),
            fn () => Resilient::assertSentCount(2),
            fn () => Resilient::assertSent(fn (RecordedRequest $r) => $r->path() === '/y'),
            fn () => Resilient::assertNotSent(fn (RecordedRequest $r) => $r->path() === '/x'),
        ] as $i => $assertion) {
            try {
                $assertion();
                $this->fail("assertion $i passed");
            } catch (AssertionFailedError $e) {
                $this->assertStringNotContainsString("assertion $i passed", $e->getMessage());
            }
        }
    }

    public function testABadScriptEntrySaysWhatIsExpected(): void
    {
        $this->boot([]);
        Resilient::fake(['s' => ['not a response']]);
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('the fake script for "s" must give a Resilient\Response (Response::fake(...)) or a \Throwable, got string');
        Resilient::client('s')->get('/x');
    }
}

/** Code under test: asks a named client, falls back when the client refuses. */
final class QuoteService
{
    public function __construct(private string $client)
    {
    }

    public function quote(string $postcode): string
    {
        try {
            $r = Resilient::client($this->client)->get('/quote', ['postcode' => $postcode], ['headers' => ['X-Shop' => 'main']]);

            return 'price ' . $r->json()['price'];
        } catch (Unavailable $e) {
            return 'fallback after ' . (new \ReflectionClass($e))->getShortName();
        }
    }
}
