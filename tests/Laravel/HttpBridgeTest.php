<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use GuzzleHttp\Exception\RequestException;
use GuzzleHttp\Exception\TooManyRedirectsException;
use Illuminate\Http\Client\ConnectionException;
use Illuminate\Http\Client\Events\ConnectionFailed;
use Illuminate\Http\Client\Events\RequestSending;
use Illuminate\Http\Client\Events\ResponseReceived;
use Illuminate\Http\Client\Request;
use Illuminate\Support\Facades\Event;
use Illuminate\Support\Facades\Http;
use Resilient\BudgetExhausted;
use Resilient\DeadlineExceeded;
use Resilient\FunnelFull;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\Http\GuzzleOptions;
use Resilient\Laravel\Http\ResilientPendingRequest;
use Resilient\Laravel\ResilientManager;
use Resilient\Response;
use Resilient\Tests\Harness\Run;
use Resilient\UpstreamFailed;

/**
 * `Http::resilient($name)`: Laravel's Http client (its events, Http::fake(), its request
 * building) sending through the named Resilient\Client, measured at the mock upstream.
 */
final class HttpBridgeTest extends PackageTestCase
{
    /** @var array<class-string, int> */
    private array $events = [];

    private function bootWith(string $name, array $client): void
    {
        $this->boot(['clients' => [$name => $client]]);
        $this->events = [];
        foreach ([RequestSending::class, ResponseReceived::class, ConnectionFailed::class] as $event) {
            Event::listen($event, function () use ($event) {
                $this->events[$event] = ($this->events[$event] ?? 0) + 1;
            });
        }
    }

    public function testRetriesHappenInsideTheClientAndLaravelSeesOneResponse(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-retry', [
            'max_attempts' => 3, 'backoff' => ['base' => 0.001, 'cap' => 0.002],
        ]);
        $this->up->script($key, [['status' => 503], ['status' => 503], ['status' => 200, 'json' => ['price' => 42]]]);
        $this->bootWith($name, $client);
        $originals = Resilient::budget($name)->stats()['originals'];

        $response = Http::resilient($name)->get('/quote', ['postcode' => '10110']);

        $this->assertInstanceOf(\Illuminate\Http\Client\Response::class, $response);
        $this->assertSame(200, $response->status());
        $this->assertSame(['price' => 42], $response->json());
        $attempts = $this->up->attempts($key, 3);
        $this->assertCount(3, $attempts, 'three attempts reached the upstream');
        $this->assertSame('postcode=10110', $attempts[2]['query'] ?? null);
        $this->assertSame(1, $this->events[RequestSending::class] ?? 0);
        $this->assertSame(1, $this->events[ResponseReceived::class] ?? 0, 'exactly one ResponseReceived');
        $this->assertSame(3, $response->handlerStats()['resilient_attempts']);
        $this->assertSame($originals + 1, Resilient::budget($name)->stats()['originals'], 'one original, whatever its attempts');
    }

    public function testUnderHttpFakeNothingReachesTheExtensionAndNoBudgetIsSpent(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-fake');
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);
        $before = Resilient::budget($name)->stats();
        Http::fake(['*' => Http::response(['faked' => true], 200)]);

        $response = Http::resilient($name)->post('/orders', ['sku' => 1]);

        $this->assertSame(['faked' => true], $response->json());
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'the upstream saw nothing');
        $after = Resilient::budget($name)->stats();
        $this->assertSame($before['originals'], $after['originals'], 'no original recorded');
        $this->assertSame($before['retries'], $after['retries']);
        // Laravel's own assertions see the real URL (the client's base_url) and the data.
        Http::assertSent(fn (Request $r) => $r->url() === $this->up->base($key) . '/orders' && $r['sku'] === 1);
        Http::assertSentCount(1);
        $this->assertSame(1, $this->events[ResponseReceived::class] ?? 0);
    }

    /**
     * Under Http::fake() the recorded request carries the client's configured headers and user
     * agent, as the upstream gets them from the real client (a request's own header wins, as
     * there): before, assertSent saw no X-Api-Key and Guzzle's User-Agent.
     */
    public function testUnderHttpFakeTheRecordedRequestHasTheClientsHeaders(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-fake-headers', [
            'headers' => ['X-Api-Key' => 'k1', 'X-Tenant' => 't1'],
            'user_agent' => 'myapp/1',
        ]);
        $this->up->script($key, [['status' => 200], ['status' => 200]]);
        $this->bootWith($name, $client);
        // What the upstream gets from the real client.
        Http::resilient($name)->withHeaders(['X-Tenant' => 't2'])->get('/real');
        $real = $this->up->attempts($key, 1)[0]['headers'];
        $this->assertSame(['k1', 't2', 'myapp/1'], [$real['x-api-key'], $real['x-tenant'], $real['user-agent']]);

        Http::fake();
        Http::resilient($name)->withHeaders(['X-Tenant' => 't2'])->get('/faked');
        Http::assertSent(fn (Request $r) => str_ends_with($r->url(), '/faked')
            && $r->header('X-Api-Key') === ['k1'] && $r->header('X-Tenant') === ['t2'] && $r->header('User-Agent') === ['myapp/1']);
    }

    /**
     * `attach()` through `Http::resilient()` goes as the client's `multipart` parts: a file
     * streamed from disk, under a memory_limit smaller than the file. Before, Guzzle's encoded
     * body was read into one string and copied (a fatal error here; about twice the file's
     * size at the peak). The parts arrive as plain Http:: sends them (names, file name, the
     * other fields), and nothing of the file is lost.
     */
    public function testAnAttachedFileIsStreamedFromDisk(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-attach');
        $this->up->script($key, [['status' => 200]]);
        $file = Run::dir() . '/upload-' . $name . '.bin';
        $size = 40 * 1024 * 1024;
        $f = fopen($file, 'w');
        ftruncate($f, $size);
        fclose($f);
        $code = self::childApp(['clients' => [$name => $client]]) . "require '/usr/share/php/GuzzleHttp/autoload.php';\n" . sprintf(<<<'PHP'
            $app->boot();
            $r = Illuminate\Support\Facades\Http::resilient(%s)
                ->attach('file', fopen(%s, 'r'))
                ->attach('note', 'hello')
                ->post('/upload', ['extra' => '1']);
            echo $r->status(), ' ', intdiv(memory_get_peak_usage(true), 1048576), "\n";
            PHP, var_export($name, true), var_export($file, true));
        $result = \Resilient\Tests\Harness\PhpProcess::code($code, ['memory_limit' => '32M'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(60);
        @unlink($file);
        $this->assertMatchesRegularExpression('/^200 \d+\n$/', $result->stdout, $result->describe());
        $seen = $this->up->attempts($key, 1)[0];
        $this->assertStringStartsWith('multipart/form-data; boundary=', $seen['headers']['content-type']);
        $this->assertGreaterThan($size, (int) $seen['headers']['content-length']);
        $this->assertLessThan($size + 2000, (int) $seen['headers']['content-length']);
    }

    /**
     * The parts arrive as plain Http:: (Guzzle) sends them: each part's name, file name (a file
     * stream's base name when none is given), `Content-Type` (from the file name), headers and
     * contents, in order.
     */
    public function testAttachedPartsArriveAsPlainHttpSendsThem(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-parts');
        $this->up->script($key, [['status' => 200]]);
        $this->boot(['clients' => [$name => $client]]);
        $file = Run::dir() . '/part-' . $name . '.txt';
        file_put_contents($file, "line 1\nline 2\n");
        $pdf = Run::dir() . '/part-' . $name . '.pdf';
        file_put_contents($pdf, '%PDF-1.4');
        $send = fn ($http, string $path) => $http
            ->attach('doc', fopen($file, 'r'))
            ->attach('named', 'abc', 'given.txt', ['X-Part' => '1'])
            // A PSR-7 stream of a string is a field; of a file, a file with its name and type.
            ->attach('data', \GuzzleHttp\Psr7\Utils::streamFor('some text'))
            ->attach('lazy', new \GuzzleHttp\Psr7\LazyOpenStream($pdf, 'r'))
            ->attach('str', \Illuminate\Support\Str::of('hello'))
            ->post($path, ['field' => 'v', 'other' => '2']);
        $send(Http::baseUrl($this->up->base($key)), '/plain');
        $send(Http::resilient($name), '/resilient');
        [$plain, $ours] = $this->up->attempts($key, 2);
        $parts = function (array $attempt): array {
            preg_match('/boundary=("?)([^";]+)\1/', $attempt['headers']['content-type'], $m);
            $out = [];
            foreach (array_slice(explode('--' . $m[2], $attempt['body']), 1, -1) as $raw) {
                [$head, $body] = explode("\r\n\r\n", $raw, 2);
                // Guzzle's per-part Content-Length aside: a receiver ignores it (RFC 7578 4.8).
                $lines = array_filter(array_map('strtolower', array_filter(explode("\r\n", $head))), fn ($l) => ! str_starts_with($l, 'content-length:'));
                sort($lines);
                $out[] = [$lines, substr($body, 0, -2)];
            }

            return $out;
        };
        $this->assertSame($parts($plain), $parts($ours));
        $this->assertCount(7, $parts($ours));
        @unlink($file);
        @unlink($pdf);
    }

    /**
     * With a middleware of the app's, Guzzle's encoded bytes go as they are: the middleware
     * may have read them (a signature of the body) or replaced them.
     */
    public function testWithAnAppsMiddlewareTheEncodedMultipartBodyGoesAsItIs(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-signed');
        $this->up->script($key, [['status' => 200]]);
        $this->boot(['clients' => [$name => $client]]);
        $sign = fn (callable $next) => fn ($request, array $options) => $next(
            $request->withHeader('X-Body-Md5', md5((string) $request->getBody())),
            $options,
        );
        Http::resilient($name)->withMiddleware($sign)->attach('f', 'xyz', 'a.txt')->post('/signed', ['n' => '1']);
        $seen = $this->up->attempts($key, 1)[0];
        $this->assertSame(md5($seen['body']), $seen['headers']['x-body-md5']);
    }

    /**
     * A second resilient() names the client that sends, and its base_url the host: the first
     * one's base_url, filled in for it, went on (the request went to a's host through b's
     * guards). A base URL the app set stays.
     */
    public function testASecondResilientCallSendsToItsOwnClientsHost(): void
    {
        [$a, $keyA, $clientA] = $this->upstreamClient('bridge-a');
        [$b, $keyB, $clientB] = $this->upstreamClient('bridge-b');
        $this->up->script($keyB, [['status' => 200]]);
        $this->boot(['clients' => [$a => $clientA, $b => $clientB]]);
        $this->assertSame(200, Http::resilient($a)->resilient($b)->get('/x')->status());
        $this->assertCount(1, $this->up->attempts($keyB, 1));
        $this->assertSame([], $this->up->attempts($keyA, 0, 200));

        Http::fake();
        Http::resilient($a)->baseUrl($this->up->base($keyA) . '/own')->resilient($b)->get('/y');
        Http::assertSent(fn (Request $r) => $r->url() === $this->up->base($keyA) . '/own/y');
    }

    /**
     * As the real client has it: a configured Content-Type gives way to the body's (a
     * multipart upload stays multipart, its file seen by `hasFile()`), and a configured
     * User-Agent header wins over `user_agent`.
     */
    public function testUnderHttpFakeABodysTypeAndAUserAgentHeaderWinAsInTheClient(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-fake-ct', [
            'headers' => ['Content-Type' => 'application/json', 'user-agent' => 'from-headers'],
            'user_agent' => 'from-user-agent',
        ]);
        $this->up->script($key, [['status' => 200], ['status' => 200]]);
        $this->bootWith($name, $client);
        Http::resilient($name)->attach('f', 'xyz', 'a.txt')->post('/real');
        Http::resilient($name)->get('/real-get');
        [$real, $realGet] = array_column($this->up->attempts($key, 2), 'headers');
        $this->assertStringStartsWith('multipart/form-data; boundary=', $real['content-type']);
        $this->assertSame('from-headers', $real['user-agent']);
        $this->assertSame('application/json', $realGet['content-type']);

        Http::fake();
        Http::resilient($name)->attach('f', 'xyz', 'a.txt')->post('/faked');
        Http::resilient($name)->get('/faked-get');
        $recorded = Http::recorded()->map(fn ($pair) => $pair[0]);
        $this->assertCount(2, $recorded);
        [$post, $get] = [$recorded[0], $recorded[1]];
        $this->assertTrue($post->hasFile('f'));
        $this->assertStringStartsWith('multipart/form-data; boundary=', $post->header('Content-Type')[0]);
        // (PSR-7's reading: Laravel 8's header() matches the name's case.)
        $this->assertSame('from-headers', $post->toPsrRequest()->getHeaderLine('User-Agent'), json_encode($post->headers()));
        // Without a body the configured Content-Type is sent, as the client sends it.
        $this->assertSame('application/json', $get->toPsrRequest()->getHeaderLine('Content-Type'));
    }

    /**
     * Under Http::fake() a faked redirect is followed, as plain Http:: follows it (and as the
     * client follows a real one): the fake answers before the client runs, so Guzzle's redirect
     * middleware follows it here. Before, the 302 itself came back.
     */
    public function testUnderHttpFakeAFakedRedirectIsFollowed(): void
    {
        [$name, , $client] = $this->upstreamClient('bridge-fake-redirect');
        $this->boot(['clients' => [$name => $client]]);
        Http::fake([
            '*/old' => Http::response('', 302, ['Location' => $client['base_url'] . '/new']),
            '*/new' => Http::response(['moved' => true]),
        ]);
        $plain = Http::baseUrl($client['base_url'])->get('/old');
        $ours = Http::resilient($name)->get('/old');
        $this->assertSame([200, ['moved' => true]], [$plain->status(), $plain->json()]);
        $this->assertSame([200, ['moved' => true]], [$ours->status(), $ours->json()]);
        $this->assertSame(302, Http::resilient($name)->withoutRedirecting()->get('/old')->status());
    }

    /**
     * Under Http::fake() a redirect follows the precedence it has in production: the request's
     * setting, else the client's `allow_redirects`, else Laravel's default. Before, Guzzle's
     * redirect middleware followed every 3xx whatever the client's config said, and a hop no
     * stub answered failed on Guzzle's internal option `__redirect_count`.
     */
    public function testUnderHttpFakeRedirectsFollowTheClientsPrecedence(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-fake-redirect-config');
        $base = $client['base_url'];
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => $base . '/to']]], path: '/real-from');
        $this->up->script($key, [['status' => 200, 'body' => 'landed']], path: '/to');
        [$noFollow, $oneHop] = [Run::name('bridge-fake-noredirect'), Run::name('bridge-fake-onehop')];
        $this->boot(['clients' => [
            $name => $client,
            $noFollow => $client + ['allow_redirects' => false],
            $oneHop => $client + ['allow_redirects' => ['max' => 1]],
        ]]);
        Http::fake([
            '*/old' => Http::response('', 302, ['Location' => $base . '/new']),
            '*/new' => Http::response('followed'),
            '*/twice' => Http::response('', 302, ['Location' => $base . '/old']),
            // to a URL no stub answers: Laravel sends it on, to the client
            '*/away' => Http::response('', 301, ['Location' => $base . '/to']),
        ]);

        $this->assertSame(302, Http::resilient($noFollow)->get('/old')->status(), 'the client config says no, as in production');
        $this->assertSame('followed', Http::resilient($noFollow)->withOptions(['allow_redirects' => true])->get('/old')->body(), 'the request wins');
        $this->assertSame('followed', Http::resilient($name)->get('/old')->body(), "Laravel's default");
        $this->assertSame('followed', Http::resilient($oneHop)->get('/old')->body());
        try {
            Http::resilient($oneHop)->get('/twice');
            $this->fail("a second redirect past the client's max of 1 was followed");
        } catch (TooManyRedirectsException $e) {
            $this->assertStringContainsString('Will not follow more than 1 redirects', $e->getMessage());
        }
        $this->assertSame('landed', Http::resilient($name)->get('/away')->body(), 'the unfaked hop reached the client');
        // The client answers the 3xx it was told not to follow: not followed above it either.
        $this->assertSame(302, Http::resilient($noFollow)->get('/real-from')->status());
        $this->assertSame(['/to', '/real-from'], array_column($this->up->attempts($key, 2), 'path'));
    }

    /**
     * A status PSR-7 has no room for (600) is a rejection, as Guzzle's own handler makes it
     * (RequestException), not an InvalidArgumentException from outside the rejection path.
     */
    public function testAStatusOutsidePsr7sRangeIsARequestException(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-600');
        $this->up->script($key, [['status' => 600]]);
        $this->boot(['clients' => [$name => $client]]);
        try {
            Http::resilient($name)->get('/x');
            $this->fail('a 600 answer');
        } catch (RequestException $e) {
            $this->assertStringContainsString('600', $e->getMessage());
        }
    }

    /**
     * Under Http::fake() an option the client refuses in production is refused too, with the
     * same exception, and not recorded: a test cannot pass on a call that fails in production.
     * Before, Laravel's stub answered them all with 200.
     */
    public function testUnderHttpFakeAnOptionTheClientRefusesIsRefused(): void
    {
        [$name, , $client] = $this->upstreamClient('bridge-fake-options');
        $this->bootWith($name, $client);
        $refused = [
            'debug' => [fn () => Http::resilient($name)->withOptions(['debug' => true]), \InvalidArgumentException::class],
            'a negative timeout' => [fn () => Http::resilient($name)->withOptions(['timeout' => -1]), \ValueError::class],
            'verify 123' => [fn () => Http::resilient($name)->withOptions(['verify' => 123]), \TypeError::class],
            'HTTP/1.0' => [fn () => Http::resilient($name)->withOptions(['version' => '1.0']), \InvalidArgumentException::class],
            'digest auth' => [fn () => Http::resilient($name)->withDigestAuth('u', 'p'), \InvalidArgumentException::class],
            'a misspelt option' => [fn () => Http::resilient($name)->withOptions(['timout' => 3]), \InvalidArgumentException::class],
        ];
        $messages = [];
        foreach ($refused as $what => [$request, $class]) {
            try {
                $request()->get('/quote');
                $this->fail("$what: refused in production");
            } catch (\Throwable $e) {
                $this->assertInstanceOf($class, $e, "$what: " . $e->getMessage());
                $messages[$what] = get_class($e) . ': ' . $e->getMessage();
            }
        }
        Http::fake();
        foreach ($refused as $what => [$request, $class]) {
            try {
                $request()->get('/quote');
                $this->fail("$what: answered under Http::fake()");
            } catch (\Throwable $e) {
                $this->assertSame($messages[$what], get_class($e) . ': ' . $e->getMessage(), $what);
                $this->assertInstanceOf($class, $e, $what);
            }
        }
        Http::assertNothingSent();
        // What production takes is answered as before, with the configured headers.
        $this->assertSame(200, Http::resilient($name)->withOptions(['timeout' => 2])->get('/quote')->status());
        Http::assertSentCount(1);
    }

    /** A misspelt name fails under Http::fake() as it would in production, not answered by the fake. */
    public function testUnderHttpFakeAnUnknownClientNameStillFails(): void
    {
        [$name, , $client] = $this->upstreamClient('bridge-fake-name');
        $this->bootWith($name, $client);
        Http::fake();
        try {
            Http::resilient($name . '-misspelt')->get('/quote');
            $this->fail('an unknown client name must fail');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString('no client named', $e->getMessage());
        }
        Http::assertNothingSent();
        // A name faked with Resilient::fake() needs no config (Http::fake() answers it here).
        Resilient::fake(['only-faked' => \Resilient\Response::fake(200, 'ok')]);
        $this->assertSame(200, Http::resilient('only-faked')->get('/x')->status());
    }

    /** `headers()` keys are spelt as servers usually write them, as with Guzzle over HTTP/1.1. */
    public function testResponseHeaderNamesAreTitleCased(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-header-case');
        $this->up->script($key, [['status' => 200, 'headers' => ['x-total-count' => '7', 'Retry-After' => '1', 'ETag' => '"v1"', 'X-RateLimit-Remaining' => '9'], 'body' => 'ok']]);
        $this->bootWith($name, $client);
        $response = Http::resilient($name)->get('/list');
        $headers = $response->headers();
        $this->assertSame(['7'], $headers['X-Total-Count'] ?? null, implode(', ', array_keys($headers)));
        $this->assertSame(['1'], $headers['Retry-After'] ?? null);
        $this->assertArrayHasKey('Content-Length', $headers);
        $this->assertSame(['"v1"'], $headers['ETag'] ?? null, 'the usual spelling, not Etag');
        $this->assertSame(['9'], $headers['X-RateLimit-Remaining'] ?? null);
        $this->assertSame('7', $response->header('x-total-count'), 'header() ignores case');
    }

    public function testRetryOnTheRequestIsRefusedNamingTheOneRetryOwnerRule(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-noretry');
        $this->bootWith($name, $client);
        foreach ([
            fn () => Http::resilient($name)->retry(3, 100)->get('/x'),
            fn () => Http::retry(2)->resilient($name)->get('/x'),
        ] as $i => $call) {
            try {
                $call();
                $this->fail("case $i: ->retry() was accepted");
            } catch (\LogicException $e) {
                $this->assertStringContainsString('one retry owner', $e->getMessage());
                $this->assertStringContainsString("'$name'", $e->getMessage());
            }
        }
        $this->assertSame([], $this->up->attempts($key, 0, 200));
        $this->assertSame(0, $this->events[RequestSending::class] ?? 0, 'refused before sending');
    }

    /** `retry(1)` is Laravel's one try, no retry: accepted in either order, and nothing is retried by Laravel. */
    public function testRetryOneIsOneTryInEitherOrder(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-retry1', ['max_attempts' => 1]);
        $this->up->script($key, [['status' => 503]], 'repeat_last');
        $this->bootWith($name, $client);

        $this->assertSame(503, Http::resilient($name)->retry(1)->get('/x')->status());
        $this->assertSame(503, Http::retry(1)->resilient($name)->get('/x')->status());
        $this->assertCount(2, $this->up->attempts($key, 2, 300), 'one attempt each');
    }

    public function testExhaustedRetryableStatusesComeBackAsTheLastResponse(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-503', [
            'max_attempts' => 2, 'backoff' => ['base' => 0.001, 'cap' => 0.002],
        ]);
        $this->up->script($key, [['status' => 503, 'body' => 'down', 'headers' => ['X-Why' => 'maintenance']]]);
        $this->bootWith($name, $client);

        $response = Http::resilient($name)->get('/quote');

        $this->assertSame(503, $response->status());
        $this->assertTrue($response->serverError());
        $this->assertSame('down', $response->body());
        $this->assertSame('maintenance', $response->header('X-Why'));
        $this->assertCount(2, $this->up->attempts($key, 2));
        $this->assertSame(1, $this->events[ResponseReceived::class] ?? 0);
    }

    /**
     * A retry our budget or the deadline stopped after an answer: the answer is the outcome, as
     * when max_attempts ran out (code checking `->failed()` keeps working through an outage).
     */
    public function testAnAnswerNotRetriedForLackOfBudgetOrTimeIsTheLastResponse(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-spent', [
            'max_attempts' => 3, 'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'budget' => ['ratio' => 0.0, 'floor' => 0],
        ]);
        $this->up->script($key, [['status' => 503, 'body' => 'down']]);
        $this->bootWith($name, $client);
        $response = Http::resilient($name)->get('/quote');
        $this->assertSame(503, $response->status());
        $this->assertSame('down', $response->body());
        $this->assertCount(1, $this->up->attempts($key, 1), 'the budget refused the retry');

        [$name, $key, $client] = $this->upstreamClient('bridge-late', [
            'max_attempts' => 3, 'deadline' => 2.0,
        ]);
        $this->up->script($key, [['status' => 503, 'headers' => ['Retry-After' => '30']]]);
        $this->bootWith($name, $client);
        $response = Http::resilient($name)->get('/quote');
        $this->assertSame(503, $response->status());
        $this->assertSame('30', $response->header('Retry-After'));
        $this->assertCount(1, $this->up->attempts($key, 1), 'no time left for the wait');
    }

    public function testOurRefusalRejectsWithTheResilientException(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-full', ['funnel' => ['limit' => 1]]);
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);
        $lease = Resilient::funnel($name)->tryAcquire();
        $this->assertNotNull($lease);
        try {
            Http::resilient($name)->get('/quote');
            $this->fail('expected FunnelFull');
        } catch (FunnelFull $e) {
            $this->assertSame(0, $e->getCode());
        } finally {
            $lease->release();
        }
        $this->assertSame([], $this->up->attempts($key, 0, 200));
        $this->assertSame(0, $this->events[ResponseReceived::class] ?? 0);
    }

    public function testAConnectionFailureIsLaravelsConnectionExceptionWithTheClientsCause(): void
    {
        $name = Run::name('bridge-refused');
        $this->bootWith($name, ['base_url' => 'http://127.0.0.1:' . Run::freePort(), 'max_attempts' => 1]);
        try {
            Http::resilient($name)->withToken('s3cret-token')->get('/quote');
            $this->fail('expected ConnectionException');
        } catch (ConnectionException $e) {
            $cause = $e->getPrevious()?->getPrevious();
            $this->assertInstanceOf(UpstreamFailed::class, $cause);
            $this->assertSame(0, $cause->getCode());
            $this->assertStringNotContainsString('s3cret', $e->getMessage());
        }
        $this->assertSame(1, $this->events[ConnectionFailed::class] ?? 0);
    }

    /**
     * The same cause, the same exception: when the attempts reached nothing (refused, timed
     * out) and then the budget refused the retry, or the deadline ended the attempt, Laravel
     * sees the ConnectionException (and ConnectionFailed) that a call whose attempts ran out
     * gets, the client's exception under it. Thrown as themselves, which of the two a page got
     * depended on the host's budget, spent by other processes.
     */
    public function testAttemptsThatReachedNothingAreAConnectionExceptionWhateverStoppedTheRetries(): void
    {
        $refused = Run::name('bridge-refused-spent');
        [$slow, $key, $client] = $this->upstreamClient('bridge-cut', ['deadline' => 0.3, 'timeout' => 5.0]);
        $this->up->script($key, [['status' => 200, 'delay_ms' => 3000]]);
        $this->bootWith($refused, [
            'base_url' => 'http://127.0.0.1:' . Run::freePort(), 'max_attempts' => 3,
            'backoff' => ['base' => 0.001, 'cap' => 0.002], 'budget' => ['ratio' => 0.0, 'floor' => 0],
        ]);
        config(["resilient.clients.$slow" => $client]);
        foreach ([$refused => [BudgetExhausted::class, 'connect'], $slow => [DeadlineExceeded::class, 'timeout']] as $name => [$class, $failure]) {
            try {
                Http::resilient($name)->get('/quote');
                $this->fail("$name: expected ConnectionException");
            } catch (ConnectionException $e) {
                $cause = $e->getPrevious()?->getPrevious();
                $this->assertInstanceOf($class, $cause, $name);
                $this->assertSame($failure, $cause->failure(), $name);
                $this->assertSame($cause->getMessage(), $e->getMessage(), $name);
            }
        }
        $this->assertSame(2, $this->events[ConnectionFailed::class] ?? 0);
        $this->assertCount(1, $this->up->attempts($key, 1), 'the deadline ended the one attempt');
    }

    /**
     * As Guzzle's curl handler sorts them: only a failure to reach the upstream (refused,
     * timed out, TLS, closed before any answer) is a ConnectException, so Laravel's
     * ConnectionException. A body over max_body is a Guzzle RequestException and a redirect
     * loop its TooManyRedirectsException, neither taken for an unreachable host.
     */
    public function testOnlyAFailureToReachTheUpstreamIsAConnectionException(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-not-connect', ['max_attempts' => 1, 'max_body' => 500]);
        $this->up->script($key, [['status' => 200, 'body' => str_repeat('x', 1000)]], path: '/big');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => $this->up->base($key) . '/loop']]], path: '/loop');
        $this->bootWith($name, $client);
        foreach (['/big' => [RequestException::class, 'too_large'], '/loop' => [TooManyRedirectsException::class, 'redirects']] as $path => [$class, $failure]) {
            try {
                Http::resilient($name)->withOptions(['allow_redirects' => ['max' => 2]])->get($path);
                $this->fail("expected $class for $path");
            } catch (ConnectionException $e) {
                $this->fail("$path: taken for a connection failure: " . $e->getMessage());
            } catch (RequestException $e) {
                $this->assertInstanceOf($class, $e, "$path: " . $e->getMessage());
                $this->assertInstanceOf(UpstreamFailed::class, $e->getPrevious(), $path);
                $this->assertSame($failure, $e->getPrevious()->failure(), $path);
                $this->assertSame($this->up->base($key) . $path, (string) $e->getRequest()->getUri());
            }
        }
        $this->assertSame(0, $this->events[ConnectionFailed::class] ?? 0);
    }

    public function testTheRequestLaravelBuildsIsTheRequestTheUpstreamGets(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-shape', ['headers' => ['X-Client' => 'config']]);
        $this->up->script($key, [['status' => 201]]);
        $this->bootWith($name, $client);

        Http::resilient($name)->withToken('tok')->withHeaders(['Idempotency-Key' => 'k-1'])
            ->post('/orders?src=web', ['sku' => 7, 'name' => 'ü']);
        Http::resilient($name)->asForm()->put('/form', ['a' => '1', 'b' => 'x y']);
        $file = Run::tempDir('bridge') . '/label.txt';
        file_put_contents($file, 'LABEL-BYTES');
        Http::resilient($name)->attach('label', fopen($file, 'r'), 'label.txt')->post('/upload', ['note' => 'hi']);
        Http::resilient($name)->withBody('raw-bytes', 'text/plain')->patch('/raw');

        [$json, $form, $multipart, $raw] = $this->up->attempts($key, 4);
        $h = fn (array $a, string $n) => $a['headers'][strtolower($n)] ?? null;
        $this->assertSame(['POST', '/orders', 'src=web'], [$json['method'], $json['path'], $json['query']]);
        $this->assertSame('{"sku":7,"name":"\u00fc"}', $json['body']);
        $this->assertSame('application/json', $h($json, 'content-type'));
        $this->assertSame('Bearer tok', $h($json, 'authorization'));
        $this->assertSame('k-1', $h($json, 'idempotency-key'));
        $this->assertSame('config', $h($json, 'x-client'), 'the client\'s configured headers still apply');
        $this->assertStringStartsWith('GuzzleHttp/', (string) $h($json, 'user-agent'));
        $this->assertSame('a=1&b=x+y', $form['body']);
        $this->assertSame('application/x-www-form-urlencoded', $h($form, 'content-type'));
        $this->assertStringStartsWith('multipart/form-data; boundary=', (string) $h($multipart, 'content-type'));
        $this->assertStringContainsString('LABEL-BYTES', $multipart['body']);
        $this->assertStringContainsString('filename="label.txt"', $multipart['body']);
        // The client's own multipart encoding (a file streamed from disk), without Guzzle's
        // per-part Content-Length, which a receiver ignores (RFC 7578 4.8).
        $this->assertStringContainsString("name=\"note\"\r\n\r\nhi", $multipart['body']);
        $this->assertStringContainsString("filename=\"label.txt\"\r\nContent-Type: text/plain\r\n\r\nLABEL-BYTES", $multipart['body']);
        $this->assertSame(['PATCH', 'raw-bytes', 'text/plain'], [$raw['method'], $raw['body'], $h($raw, 'content-type')]);
    }

    /**
     * A `base_url` with a query (`?api-version=2`, an API key) keeps it, as the client does:
     * the base's query first, then the request's. Laravel 8 joins the strings
     * (`/api?v=2/items`), and Guzzle's `query` option then replaced the whole query: the
     * request went to the base's path, without the base's query, and no error said so.
     */
    public function testABaseUrlsQueryIsKeptAsTheClientKeepsIt(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-basequery');
        $client['base_url'] .= '/api?v=2&key=K';
        $this->bootWith($name, $client);

        $seen = [];
        Event::listen(RequestSending::class, function (RequestSending $e) use (&$seen) {
            $seen[] = $e->request->url();
        });
        $effective = [];
        Http::resilient($name)->get('/items', ['q' => 1]);
        Http::resilient($name)->get('/items?page=3');
        Http::resilient($name)->get('items');
        // A key the request gives replaces the base's, as the client's own query does.
        $effective[] = (string) Http::resilient($name)->get('/items', ['key' => 'mine', 'q' => 1])->effectiveUri();
        // A path's own query is put beside the base's, as the client puts it.
        Http::resilient($name)->get('/items?key=path');
        Resilient::client($name)->get('/items', ['q' => 1]);
        Resilient::client($name)->get('/items', ['key' => 'mine', 'q' => 1]);
        Resilient::client($name)->get('/items?key=path');
        $got = array_map(fn ($a) => [$a['path'], $a['query']], $this->up->attempts($key, 8));
        $this->assertSame([
            ['/api/items', 'v=2&key=K&q=1'],
            ['/api/items', 'v=2&key=K&page=3'],
            ['/api/items', 'v=2&key=K'],
            ['/api/items', 'v=2&key=mine&q=1'],
            ['/api/items', 'v=2&key=K&key=path'],
            ['/api/items', 'v=2&key=K&q=1'],
            ['/api/items', 'v=2&key=mine&q=1'],
            ['/api/items', 'v=2&key=K&key=path'],
        ], $got);
        // Events and the response show the URL sent, not one without the base's query.
        $base = $this->up->base($key) . '/api/items?';
        $this->assertSame([$base . 'v=2&key=K&q=1', $base . 'v=2&key=K&page=3', $base . 'v=2&key=K', $base . 'v=2&key=mine&q=1', $base . 'v=2&key=K&key=path'], $seen);
        $this->assertSame([$base . 'v=2&key=mine&q=1'], $effective);
    }

    /**
     * A `User-Agent` in the client's configured `headers` is sent, as `Resilient::client()`
     * sends it, not Guzzle's default one nobody asked for (some APIs refuse that one).
     */
    public function testAUserAgentInTheConfiguredHeadersIsSent(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-ua', ['headers' => ['user-agent' => 'Shop/1.2 (ops@example.com)']]);
        $this->bootWith($name, $client);

        Http::resilient($name)->get('/x');
        Http::resilient($name)->withUserAgent('Asked/1')->get('/x');
        $agents = array_map(fn ($a) => $a['headers']['user-agent'] ?? null, $this->up->attempts($key, 2));
        $this->assertSame(['Shop/1.2 (ops@example.com)', 'Asked/1'], $agents, 'the request\'s own still wins');
    }

    /**
     * The client follows redirects inside the call, so Guzzle's cookie middleware above it saw
     * only the first request: a cookie the last hop set was filed under the first host, and
     * sent there by the next request using the jar. It is filed under the host that set it.
     */
    public function testACookieSetAfterARedirectIsFiledUnderTheHostThatSetIt(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-cookie');
        $other = str_replace('://127.0.0.1:', '://localhost:', $this->up->base($key));
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "$other/to"]]], path: '/from');
        $this->up->script($key, [['status' => 200, 'body' => 'landed', 'headers' => ['Set-Cookie' => 'sid=abc; Path=/']]], path: '/to');
        $this->bootWith($name, $client);

        $landed = Http::resilient($name)->get('/from');
        $this->assertSame('landed', $landed->body());
        $jar = $landed->cookies();
        $this->assertSame([['sid', 'localhost']], array_map(fn ($c) => [$c->getName(), $c->getDomain()], iterator_to_array($jar)));
        Http::resilient($name)->withOptions(['cookies' => $jar])->get('/echo');
        Http::resilient($name)->withOptions(['cookies' => $jar])->get("$other/echo");
        [, , $first, $second] = $this->up->attempts($key, 4);
        $this->assertArrayNotHasKey('cookie', $first['headers'], 'another host\'s cookie was sent to 127.0.0.1');
        $this->assertSame('sid=abc', $second['headers']['cookie'] ?? null, 'sent back to the host that set it');
    }

    public function testTheClientsRulesApplyAPostIsRetriedOnlyWithAnIdempotencyKey(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-post', ['backoff' => ['base' => 0.001, 'cap' => 0.002]]);
        $this->up->script($key, [['status' => 503], ['status' => 200]], 'repeat_last', '/keyed');
        $this->up->script($key, [['status' => 503], ['status' => 200]], 'repeat_last', '/plain');
        $this->bootWith($name, $client);

        $this->assertSame(503, Http::resilient($name)->post('/plain', ['sku' => 1])->status(), 'not retried without a key');
        $this->assertSame(200, Http::resilient($name)->withHeaders(['Idempotency-Key' => 'order-9'])->post('/keyed', ['sku' => 1])->status());
        $attempts = $this->up->attempts($key, 3);
        $this->assertSame(['/plain', '/keyed', '/keyed'], array_column($attempts, 'path'));
        $this->assertSame(['order-9', 'order-9'], [$attempts[1]['headers']['idempotency-key'], $attempts[2]['headers']['idempotency-key']]);
    }

    public function testRedirectsFollowLaravelsDefaultUnlessTheRequestOrConfigSaysOtherwise(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-redirect');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => $this->up->base($key) . '/to']]], path: '/from');
        $this->up->script($key, [['status' => 200, 'body' => 'landed']], path: '/to');
        $noFollow = Run::name('bridge-noredirect');
        $this->boot(['clients' => [$name => $client, $noFollow => $client + ['allow_redirects' => false]]]);

        $landed = Http::resilient($name)->get('/from');
        $this->assertSame('landed', $landed->body(), 'Laravel follows by default');
        $this->assertSame($this->up->base($key) . '/to', (string) $landed->effectiveUri(), 'as Guzzle: where the redirects led');
        $stayed = Http::resilient($name)->withoutRedirecting()->get('/from');
        $this->assertSame(302, $stayed->status());
        $this->assertSame($this->up->base($key) . '/from', (string) $stayed->effectiveUri());
        // Not redirected: the request's own URI as Guzzle writes it (no '/' added to an empty
        // path, the user-info kept), however the client writes the URL it sent.
        $root = 'http://user:pw@127.0.0.1:' . parse_url($this->up->base($key), PHP_URL_PORT);
        $this->assertSame($root, (string) Http::resilient($name)->get($root)->effectiveUri());
        $this->assertSame(302, Http::resilient($noFollow)->get('/from')->status(), 'the client config decides when it says');
        $this->assertSame(['/from', '/to', '/from', '/from'], array_column($this->up->attempts($key, 4), 'path'));
    }

    public function testTimeoutAndSinkAreTheClientsPerRequestOptions(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-timeout', ['timeout' => 5.0, 'max_attempts' => 1]);
        $this->up->script($key, [['hang' => true, 'hang_ms' => 5000]], path: '/slow');
        $this->up->script($key, [['status' => 200, 'body' => 'into the file']], path: '/file');
        $this->bootWith($name, $client);

        $t = hrtime(true);
        try {
            Http::resilient($name)->withOptions(['timeout' => 0.3])->get('/slow');
            $this->fail('expected a timeout');
        } catch (ConnectionException $e) {
            $this->assertLessThan(2.0, (hrtime(true) - $t) / 1e9, 'the request\'s 0.3 s, not the client\'s 5 s');
        }

        $path = Run::tempDir('bridge') . '/sink.txt';
        $response = Http::resilient($name)->sink($path)->get('/file');
        $this->assertSame('into the file', file_get_contents($path));
        $this->assertSame('into the file', $response->body());

        $file = fopen($path . '.2', 'w+');   // a plain-file stream: written by the client itself
        $response = Http::resilient($name)->sink($file)->get('/file');
        $this->assertSame('into the file', file_get_contents($path . '.2'));
        $this->assertSame('into the file', $response->body());

        $memory = fopen('php://temp', 'w+');
        $response = Http::resilient($name)->sink($memory)->get('/file');   // as with Guzzle, the body owns the stream
        $this->assertSame('into the file', stream_get_contents($memory, -1, 0));
        $this->assertSame('into the file', $response->body());
    }

    /** Under Resilient::fake() a sink gets the scripted body, as the real client writes it (and Http::fake() does). */
    public function testUnderResilientFakeASinkGetsTheScriptedBody(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-fsink');
        $this->bootWith($name, $client);
        Resilient::fake([$name => Response::fake(200, 'FAKE BODY', ['X-From' => 'fake'])]);
        $path = Run::tempDir('bridge') . '/sink.txt';

        $response = Http::resilient($name)->sink($path)->get('/f');
        $this->assertSame(['FAKE BODY', 'FAKE BODY', 'fake'], [$response->body(), file_get_contents($path), $response->header('X-From')]);

        $file = fopen($path . '.2', 'w+');
        $this->assertSame('FAKE BODY', Http::resilient($name)->sink($file)->get('/f')->body());
        $this->assertSame('FAKE BODY', file_get_contents($path . '.2'));

        $memory = fopen('php://temp', 'w+');
        $response = Http::resilient($name)->sink($memory)->get('/f');   // the body owns the stream
        $this->assertSame('FAKE BODY', $response->body());
        $this->assertSame('FAKE BODY', stream_get_contents($memory, -1, 0));

        // A scripted UpstreamFailed's last response goes to the sink too, as the real client writes it.
        $exhausted = new class ('503 × 3') extends UpstreamFailed {
            public function __construct(string $message)
            {
                parent::__construct($message, 503);
                $this->response = Response::fake(503, 'DOWN');
            }
        };
        Resilient::fake([$name => $exhausted]);
        $response = Http::resilient($name)->sink($path)->get('/f');
        $this->assertSame([503, 'DOWN', 'DOWN'], [$response->status(), $response->body(), file_get_contents($path)]);

        // The fake client itself, as the real one: the body in the sink, body() ''.
        Resilient::fake([$name => Response::fake(200, 'FAKE BODY')]);
        $direct = Resilient::client($name)->get('/f', null, ['sink' => $path . '.3']);
        $this->assertSame(['', 'FAKE BODY'], [$direct->body(), file_get_contents($path . '.3')]);
        // 'sink' => false (or null) is no sink, as for the real client.
        Resilient::fake([$name => Response::fake(200, 'FAKE BODY')]);
        $this->assertSame('FAKE BODY', Resilient::client($name)->get('/f', null, ['sink' => false])->body());
        $this->assertSame([], $this->up->attempts($key, 0, 200));
    }

    /**
     * A scripted `new UpstreamFailed($message, $code)` is read as the real client's contract
     * says (the code is the last status, 0 a connection error) and reaches the app as the real
     * client's would: 503s exhausted are a 503 response, a code 0 a ConnectionException. Before,
     * both were a RequestException, which the real client never gives, and directly the
     * exception had neither response() nor failure().
     */
    public function testAScriptedUpstreamFailedReachesTheAppAsTheRealClientsWould(): void
    {
        $name = Run::name('bridge-scripted-failure');
        $this->bootWith($name, ['base_url' => 'http://127.0.0.1:9/']);
        Resilient::fake([$name => [new UpstreamFailed('503 × 3', 503), new UpstreamFailed('refused')]]);

        $response = Http::resilient($name)->get('/a');
        $this->assertSame([503, true], [$response->status(), $response->failed()]);
        try {
            Http::resilient($name)->get('/b');
            $this->fail('a code 0 is a connection error');
        } catch (ConnectionException $e) {
            $this->assertStringContainsString('refused', $e->getMessage());
        }

        Resilient::fake([$name => [new UpstreamFailed('503 × 3', 503), new UpstreamFailed('refused')]]);
        foreach ([[503, null], [null, 'connect']] as [$status, $failure]) {
            try {
                Resilient::client($name)->get('/c');
                $this->fail('scripted to throw');
            } catch (UpstreamFailed $e) {
                $this->assertSame([$status, $failure], [$e->response()?->status(), $e->failure()]);
            }
        }

        // Thrown by a closure script rather than returned: the same answer, and recorded.
        Resilient::fake([$name => fn () => throw new UpstreamFailed('503 × 3', 503)]);
        $this->assertSame(503, Http::resilient($name)->get('/d')->status());
        Resilient::assertSent(fn ($r, $outcome) => str_ends_with($r->url(), '/d') && $outcome instanceof UpstreamFailed);
    }

    public function testInsideHttpPoolTheBridgeRefersToTheClientsOwnPool(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-pool');
        $this->bootWith($name, $client);
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage("Use Resilient::client('$name')->pool([...]) instead");
        Http::pool(fn ($pool) => [$pool->as('a')->resilient($name)->get('/a')]);
    }

    /**
     * `->pool()` on a resilient request is refused as `->async()` is: Laravel's pool builds its
     * requests from the plain factory, so before they went out through Guzzle without the
     * client's base URL, headers, funnel and budget (and `$pool->as()` failed on a missing
     * `wait()`).
     */
    public function testPoolOnTheResilientRequestIsRefused(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-own-pool', ['headers' => ['X-Api-Key' => 'k1']]);
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);
        $originals = Resilient::budget($name)->stats()['originals'];
        $url = $this->up->base($key) . '/a';
        foreach ([
            'pool()' => fn ($pool) => [$pool->get($url)],
            'pool() with as()' => fn ($pool) => [$pool->as('k')->get($url)],
        ] as $how => $requests) {
            try {
                Http::resilient($name)->pool($requests);
                $this->fail("$how was accepted");
            } catch (\LogicException $e) {
                $this->assertStringContainsString("Http::resilient('$name')", $e->getMessage(), $how);
                $this->assertStringContainsString("Use Resilient::client('$name')->pool([...]) instead", $e->getMessage(), $how);
            }
        }
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'nothing was sent');
        $this->assertSame($originals, Resilient::budget($name)->stats()['originals']);
        $this->assertSame(0, $this->events[RequestSending::class] ?? 0);
    }

    /**
     * `->async()` is refused as inside Http::pool() (a client call is synchronous): before, a
     * refusal such as FunnelFull reached Laravel's promise, which takes only Guzzle's
     * TransferException, and came out as a TypeError.
     */
    public function testAsyncIsRefusedAsInsideHttpPool(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-async', ['funnel' => ['limit' => 1]]);
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);
        $lease = Resilient::funnel($name)->tryAcquire();
        try {
            foreach ([
                'async()' => fn () => Http::resilient($name)->async()->get('/a'),
                'async() before resilient()' => fn () => Http::async()->resilient($name)->get('/a'),
            ] as $how => $call) {
                try {
                    $call()->wait();
                    $this->fail("$how was accepted");
                } catch (\LogicException $e) {
                    $this->assertStringContainsString("Use Resilient::client('$name')->pool([...]) instead", $e->getMessage(), $how);
                }
            }
        } finally {
            $lease?->release();
        }
        $this->assertSame(200, Http::resilient($name)->async(false)->get('/a')->status(), 'async(false) is the usual call');
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    /**
     * `withOptions(['version' => ...])`: Guzzle moves it into the PSR-7 request's protocol
     * version before the handler runs; the client speaks HTTP/1.1 (HTTP/2 by ALPN on https), so
     * any other version is refused by name rather than silently sent as 1.1.
     */
    public function testAProtocolVersionOtherThanOnePointOneIsRefused(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-version', ['max_attempts' => 1]);
        $this->up->script($key, [['status' => 200]], 'repeat_last');
        $this->bootWith($name, $client);
        foreach (['2.0', '2', '1.0', 3] as $version) {
            try {
                Http::resilient($name)->withOptions(['version' => $version])->get('/v');
                $this->fail("version $version was sent as HTTP/1.1");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString("Http::resilient('$name'): option 'version' is not supported", $e->getMessage());
            }
        }
        $this->assertSame([], $this->up->attempts($key, 0, 200));
        $this->assertSame(200, Http::resilient($name)->withOptions(['version' => '1.1'])->get('/v')->status());
        $this->assertSame(200, Http::resilient($name)->withOptions(['version' => 1.1])->get('/v')->status());
        $this->assertSame(200, Http::resilient($name)->get('/v')->status(), "Laravel's default");
        $this->assertCount(3, $this->up->attempts($key, 3));
    }

    public function testAnOptionTheClientCannotHonourIsRefusedByName(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-refuse');
        $this->bootWith($name, $client);
        foreach (['progress' => fn () => null, 'delay' => 100, 'bogus_option' => 1] as $option => $value) {
            try {
                Http::resilient($name)->withOptions([$option => $value])->get('/x');
                $this->fail("option $option was accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringContainsString("option '$option' is not supported", $e->getMessage());
            }
        }
        try {
            Http::resilient($name)->withDigestAuth('user', 'digest-secret')->get('/x');
            $this->fail('digest auth was accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString("option 'auth' is not supported: 'digest' authentication", $e->getMessage());
            $this->assertStringNotContainsString('digest-secret', $e->getMessage());
        }
        // Basic auth is a header Guzzle already wrote.
        $this->up->script($key, [['status' => 200]]);
        Http::resilient($name)->withBasicAuth('user', 'pw')->get('/basic');
        $attempts = $this->up->attempts($key, 1);
        $this->assertCount(1, $attempts, 'only the basic-auth request was sent');
        $this->assertSame('Basic ' . base64_encode('user:pw'), $attempts[0]['headers']['authorization']);
    }

    /** Options given to send() are the request's own, as withOptions() ones: used, or refused by name. */
    public function testSendsOptionsCountAsTheRequestsOwn(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-send', ['max_attempts' => 1]);
        $this->up->script($key, [['status' => 200, 'body' => 'direct']], 'repeat_last');
        $this->bootWith($name, $client);
        $deadProxy = 'http://127.0.0.1:' . Run::freePort();

        foreach ([
            'send()' => fn () => Http::resilient($name)->send('GET', '/x', ['proxy' => $deadProxy]),
            'withOptions()' => fn () => Http::resilient($name)->withOptions(['proxy' => $deadProxy])->get('/x'),
        ] as $how => $call) {
            try {
                $call();
                $this->fail("$how: the proxy was not used, the request went direct");
            } catch (ConnectionException $e) {
                $this->assertInstanceOf(UpstreamFailed::class, $e->getPrevious()?->getPrevious(), $how);
            }
        }
        try {
            Http::resilient($name)->send('GET', '/x', ['delay' => 100]);
            $this->fail('delay given to send() was accepted');
        } catch (\InvalidArgumentException $e) {
            $this->assertStringContainsString("option 'delay' is not supported", $e->getMessage());
        }
        $this->assertSame([], $this->up->attempts($key, 0, 200), 'nothing went direct');
        $this->assertSame('direct', Http::resilient($name)->send('GET', '/x')->body(), 'the next request has no proxy');
    }

    /** Laravel 8 joins even an absolute URL to baseUrl, which the bridge fills from base_url. */
    public function testAnAbsoluteUrlIsSentAsGiven(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-abs');
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);

        $this->assertSame(200, Http::resilient($name)->get($this->up->base($key) . '/abs', ['q' => '1'])->status());
        $this->assertSame(200, Http::resilient($name)->get('/rel')->status());
        [$abs, $rel] = $this->up->attempts($key, 2);
        $this->assertSame(['/abs', 'q=1'], [$abs['path'], $abs['query']]);
        $this->assertSame('/rel', $rel['path']);
    }

    /**
     * A client's `fallback` is for callers of the client; Laravel's Http expects a response or
     * an exception, so the bridge uses the client without it.
     */
    public function testAClientsFallbackIsNotWhatLaravelReceives(): void
    {
        $name = Run::name('bridge-fallback');
        $this->bootWith($name, ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1, 'fallback' => fn () => ['stale' => true]]);
        $this->assertSame(['stale' => true], Resilient::client($name)->get('/x'), 'the client itself falls back');
        try {
            Http::resilient($name)->get('/x');
            $this->fail('expected ConnectionException');
        } catch (ConnectionException $e) {
            $this->assertInstanceOf(UpstreamFailed::class, $e->getPrevious()?->getPrevious());
        }

        Resilient::fake([$name => new FunnelFull('full')]);
        $this->assertSame(['stale' => true], Resilient::client($name)->get('/x'), 'the fake falls back too');
        $this->expectException(FunnelFull::class);
        Http::resilient($name)->get('/x');
    }

    /** Guzzle's own User-Agent gives way to a `user_agent` the client's config sets. */
    public function testTheClientsConfiguredUserAgentIsSent(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-ua', ['user_agent' => 'shop/1.0']);
        $this->up->script($key, [['status' => 200]]);
        $this->bootWith($name, $client);

        Http::resilient($name)->get('/a');
        Http::resilient($name)->withUserAgent('mine/2')->get('/b');
        [$a, $b] = $this->up->attempts($key, 2);
        $this->assertSame('shop/1.0', $a['headers']['user-agent'] ?? null);
        $this->assertSame('mine/2', $b['headers']['user-agent'] ?? null, 'what the request sets wins');
    }

    /**
     * A request's timeout the client refuses is refused, naming the option, before anything is
     * sent: `->timeout(-1)` (\\ValueError), `withOptions(['timeout' => 'abc'])` (\\TypeError), as
     * Laravel's own Guzzle fails on them (before, the client's own timeout was used in silence).
     * Only Guzzle's 0 ("no limit") leaves the client's; a numeric string is a number, as in config.
     */
    public function testARequestTimeoutTheClientRefusesIsRefusedByName(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-bad-timeout', ['timeout' => 5.0, 'max_attempts' => 1]);
        $this->up->script($key, [['hang' => true, 'hang_ms' => 5000]], path: '/slow');
        $this->bootWith($name, $client);
        foreach ([
            [fn () => Http::resilient($name)->timeout(-1), \ValueError::class, "option 'timeout'"],
            [fn () => Http::resilient($name)->withOptions(['timeout' => 'abc']), \TypeError::class, "option 'timeout'"],
            [fn () => Http::resilient($name)->withOptions(['timeout' => INF]), \ValueError::class, "option 'timeout'"],
            [fn () => Http::resilient($name)->withOptions(['connect_timeout' => 'x']), \TypeError::class, "option 'connect_timeout'"],
            [fn () => Http::resilient($name)->withOptions(['connect_timeout' => -0.5]), \ValueError::class, "option 'connect_timeout'"],
        ] as $i => [$request, $class, $names]) {
            try {
                $request()->get('/slow');
                $this->fail("request $i was sent");
            } catch (\ValueError|\TypeError $e) {
                $this->assertInstanceOf($class, $e, "request $i: " . $e->getMessage());
                $this->assertStringContainsString($names, $e->getMessage(), "request $i");
            }
        }
        $this->assertSame([], $this->up->attempts($key, 0, 300), 'nothing was sent');

        $t = hrtime(true);
        try {
            Http::resilient($name)->withOptions(['timeout' => '0.3'])->get('/slow');
            $this->fail('expected a timeout');
        } catch (ConnectionException $e) {
            $this->assertLessThan(2.0, (hrtime(true) - $t) / 1e9, "the request's '0.3' s, not the client's 5 s");
        }
        foreach ([0, 0.0, '0'] as $none) {
            $this->assertSame([], GuzzleOptions::toClient(['timeout' => $none, 'connect_timeout' => $none], ['timeout', 'connect_timeout'], [], 'x'), var_export($none, true));
        }
    }

    /**
     * Laravel 9+ starts every request with `timeout` 30 and `connect_timeout` 10, 11+ with
     * `crypto_method`: defaults the request did not set, so neither the client's config is
     * overridden nor the request refused. (Debian ships Laravel 8: checked on the options
     * such a request hands to the handler.)
     */
    public function testLaravelsOwnDefaultOptionsDoNotOverrideTheClient(): void
    {
        $defaults = ['http_errors' => false, 'connect_timeout' => 10, 'timeout' => 30, 'crypto_method' => 33];
        $this->assertSame([], GuzzleOptions::toClient($defaults, [], [], 'x', $defaults));
        $this->assertSame(['timeout' => 0.5], GuzzleOptions::toClient(['timeout' => 0.5] + $defaults, ['timeout'], [], 'x', $defaults));
        $this->expectExceptionMessage("option 'crypto_method' is not supported");
        GuzzleOptions::toClient(['crypto_method' => 65] + $defaults, ['crypto_method'], [], 'x', $defaults);
    }

    /** Laravel 10+'s `retry([100, 200])` (an array of waits) is a retry loop too. */
    public function testARetryGivenAsAListOfWaitsIsRefused(): void
    {
        $this->bootWith('x', ['base_url' => 'http://127.0.0.1:9']);
        $request = Http::withOptions([]);
        (fn () => $this->tries = [100, 200])->call($request);
        $this->expectException(\LogicException::class);
        $this->expectExceptionMessage('->retry() is refused');
        ResilientPendingRequest::from($request, 'x', $this->app->make(ResilientManager::class));
    }

    /** `assertSent` sees what the code asked for: the query and the JSON, as with Resilient::client(). */
    public function testUnderResilientFakeTheRecordedRequestHasTheQueryAndTheJson(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-recorded');
        $this->bootWith($name, $client);
        Resilient::fake();

        Http::resilient($name)->get('/quote', ['postcode' => '10110']);
        Http::resilient($name)->post('/orders', ['sku' => 3]);

        Resilient::assertSent(fn ($r) => $r->method() === 'GET' && $r->query() === ['postcode' => '10110'] && $r->url() === $this->up->base($key) . '/quote');
        Resilient::assertSent(fn ($r) => $r->method() === 'POST' && $r->json() === ['sku' => 3]);
    }

    /** `data()` is what Laravel's Request::data() gives: the JSON, the form, else the query; as for Resilient::client(). */
    public function testUnderResilientFakeTheRecordedDataIsWhatLaravelsRequestGives(): void
    {
        [$name, , $client] = $this->upstreamClient('bridge-data');
        $this->bootWith($name, $client);
        Resilient::fake();

        Http::resilient($name)->post('/orders', ['sku' => 3]);
        Http::resilient($name)->asForm()->post('/form', ['a' => 'b', 'c' => ['d' => 'e']]);
        Http::resilient($name)->get('/quote', ['postcode' => '10110']);
        Resilient::client($name)->post('/orders', ['sku' => 3]);
        Resilient::client($name)->get('/quote', ['postcode' => '10110']);

        $this->assertSame(
            [['sku' => 3], ['a' => 'b', 'c' => ['d' => 'e']], ['postcode' => '10110'], ['sku' => 3], ['postcode' => '10110']],
            array_map(fn ($pair) => $pair[0]->data(), Resilient::recorded()),
        );
    }

    public function testUnderResilientFakeTheBridgeGetsTheScriptedAnswers(): void
    {
        [$name, $key, $client] = $this->upstreamClient('bridge-rfake');
        $this->bootWith($name, $client);
        Resilient::fake([$name => [Response::fake(202, '{"queued":true}', ['X-From' => 'fake'])]]);

        $response = Http::resilient($name)->post('/orders', ['sku' => 3]);

        $this->assertSame(202, $response->status());
        $this->assertSame(['queued' => true], $response->json());
        $this->assertSame('fake', $response->header('X-From'));
        Resilient::assertSent(fn ($r) => $r->method() === 'POST' && $r->url() === $this->up->base($key) . '/orders');
        $this->assertSame([], $this->up->attempts($key, 0, 200));
    }
}
