<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Support\Facades\Http;
use PHPUnit\Framework\ExpectationFailedException;
use PHPUnit\Framework\TestFailure;
use Resilient\Laravel\Events\AttemptMade;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\Http\ConfiguredHeaders;
use Resilient\Laravel\Http\GuzzleOptions;
use Resilient\Laravel\Http\ResilientHandler;
use Resilient\Laravel\Http\ResilientPendingRequest;
use Resilient\Laravel\Queue\QueueSettings;
use Resilient\Laravel\ResilientManager;
use Resilient\Laravel\Testing\ClientFake;
use Resilient\Laravel\Testing\FakeClients;
use Resilient\Laravel\Testing\RecordedRequest;
use Resilient\Laravel\Testing\StrayRequest;
use Resilient\Response;
use Resilient\Tests\Harness\Run;

/**
 * What the package shows of a secret (a header value, a URL's user-info or query, a Redis URL
 * put where another value belongs): nothing, in a failing fake assertion, a dumped recording,
 * a stray-call message, an option's refusal or a stack trace's arguments.
 */
final class SecretsTest extends PackageTestCase
{
    /** Every secret the config and the calls below carry. */
    private const SECRETS = ['urlpass', 'APIKEY123', 'SECRETTOKEN', 'COOKIEVAL', 'hunter2', 'TOKENVAL', 's3cret'];

    /** A client whose config holds secrets: user-info and a key in `base_url`, Authorization and Cookie headers. */
    private function bootSecretClient(string $base = 'http://user:urlpass@127.0.0.1:1/api?api_key=APIKEY123'): string
    {
        $name = Run::name('secrets');
        $this->boot(['clients' => [$name => [
            'base_url' => $base,
            'headers' => ['Authorization' => 'Bearer SECRETTOKEN', 'Cookie' => 'sid=COOKIEVAL', 'X-Tenant' => 't1'],
        ]]]);

        return $name;
    }

    private function assertShowsNoSecret(string $text, string $what = ''): void
    {
        foreach (self::SECRETS as $secret) {
            $this->assertStringNotContainsString($secret, $text, $what);
        }
    }

    /**
     * A failing `assertNothingSent()` names each call (client, method, URL without user-info or
     * query) and shows none of what the calls carried: before, PHPUnit's diff of the recorded
     * requests dumped their headers (the configured Authorization and Cookie too) and base URL.
     */
    public function testAFailingAssertionNamesTheCallsAndShowsNoSecret(): void
    {
        $name = $this->bootSecretClient();
        Resilient::fake([$name => Response::fake(200)]);
        Resilient::client($name)->get('/quote', ['postcode' => '10110'], ['headers' => ['X-Api-Key' => 'hunter2']]);
        Resilient::client($name)->post('/orders?token=TOKENVAL', ['sku' => 1]);

        try {
            Resilient::assertNothingSent();
            $this->fail('assertNothingSent() passed after two calls');
        } catch (ExpectationFailedException $e) {
            $shown = TestFailure::exceptionToString($e);
            $this->assertShowsNoSecret($shown);
            $this->assertStringContainsString('2 calls were made through faked Resilient clients', $shown);
            $this->assertStringContainsString("\"$name\": GET http://127.0.0.1:1/api/quote", $shown);
            $this->assertStringContainsString("\"$name\": POST http://127.0.0.1:1/api/orders", $shown);
        }
        // The other assertions fail without a dump either.
        foreach ([
            'assertSentCount' => fn () => Resilient::assertSentCount(3),
            'assertSent' => fn () => Resilient::assertSent(fn (RecordedRequest $r) => $r->method() === 'PUT'),
            'assertNotSent' => fn () => Resilient::assertNotSent(fn (RecordedRequest $r) => $r->method() === 'GET'),
        ] as $what => $assertion) {
            try {
                $assertion();
                $this->fail("$what passed");
            } catch (ExpectationFailedException $e) {
                $this->assertShowsNoSecret(TestFailure::exceptionToString($e), $what);
            }
        }
    }

    /**
     * `var_dump()` / `print_r()` of a recording show its client, method, URL without
     * user-info or query, and its headers' names, with the values of those that carry
     * credentials masked; never its body, query or options.
     */
    public function testADumpedRecordingShowsNoSecret(): void
    {
        $request = new RecordedRequest(
            'shipping',
            'POST',
            '/orders?api_key=APIKEY123',
            ['password' => 'hunter2'],
            ['headers' => [
                'X-Api-Key' => 'hunter2', 'X-Session-Token' => 'TOKENVAL', 'Proxy-Authorization' => 'Basic s3cret',
                'Set-Cookie' => 'a=COOKIEVAL', 'X-Client-Secret' => 's3cret', 'X-Password' => 's3cret', 'X-Request-Id' => 'r-42',
            ]],
            'http://user:urlpass@127.0.0.1:1/api?api_key=APIKEY123',
            ['Authorization' => 'Bearer SECRETTOKEN', 'Cookie' => 'sid=COOKIEVAL', 'X-Tenant' => 't1'],
        );
        ob_start();
        var_dump($request);
        $dumped = ob_get_clean();
        $printed = print_r($request, true);
        // Laravel's dump()/dd() (Symfony VarDumper) and var_export() list the properties
        // themselves, whatever __debugInfo() says.
        $varDumper = (new \Symfony\Component\VarDumper\Dumper\CliDumper())->dump(
            (new \Symfony\Component\VarDumper\Cloner\VarCloner())->cloneVar($request),
            true,
        );
        foreach (['VarDumper' => $varDumper, 'var_export' => var_export($request, true), '(array)' => print_r((array) $request, true)] as $what => $shown) {
            $this->assertShowsNoSecret($shown, $what);
        }
        foreach (['var_dump' => $dumped, 'print_r' => $printed] as $what => $shown) {
            $this->assertShowsNoSecret($shown, $what);
            $this->assertStringContainsString('http://127.0.0.1:1/api/orders', $shown, $what);
            $this->assertStringContainsString('POST', $shown, $what);
            foreach (['authorization', 'cookie', 'x-api-key', 'x-session-token', 'proxy-authorization', 'set-cookie', 'x-client-secret', 'x-password'] as $header) {
                $this->assertStringContainsString($header, $shown, "$what: the name $header is shown");
            }
            $this->assertStringContainsString('t1', $shown, "$what: a header without credentials is shown");
            $this->assertStringContainsString('r-42', $shown, $what);
        }
        $this->assertSame('Bearer SECRETTOKEN', $request->header('Authorization'), 'the accessors still give the values');
    }

    /**
     * A base URL or path with whitespace around it (a space, U+00A0, U+3000: the extension trims
     * Unicode whitespace) is recorded as the real client sends it, and shown without user-info:
     * before, the untrimmed base was not seen as a URL by the user-info stripping, and a path
     * starting with U+00A0 was joined to the base instead of being the absolute URL it is.
     */
    public function testWhitespaceAroundAUrlNeitherShowsTheUserInfoNorChangesTheRecordedUrl(): void
    {
        foreach ([' ', "\u{a0}", "\u{3000}\t"] as $space) {
            $name = $this->bootSecretClient($space . 'http://user:urlpass@127.0.0.1:1/api?api_key=APIKEY123' . $space);
            Resilient::fake([$name => [Response::fake(200), Response::fake(200)]]);   // two answers: the third call is stray
            Resilient::preventStrayRequests();
            Resilient::client($name)->get($space . 'https://user:urlpass@example.com/x' . $space);
            Resilient::client($name)->get($space . 'quote' . $space);
            Resilient::assertSent(fn (RecordedRequest $r) => $r->url() === 'https://user:urlpass@example.com/x');
            Resilient::assertSent(fn (RecordedRequest $r) => $r->url() === 'http://user:urlpass@127.0.0.1:1/api/quote'
                && $r->query() === ['api_key' => 'APIKEY123']);
            try {
                Resilient::client($name)->get($space . 'https://user:urlpass@example.com/x');
                $this->fail('a stray call went through');
            } catch (StrayRequest $e) {
                $this->assertStringContainsString('(GET https://example.com/x)', $e->getMessage());
                $this->assertShowsNoSecret($e->getMessage());
            }
            // The stray call with the secret base: its URL is the base's, trimmed and without user-info.
            $this->boot(['clients' => [$name => ['base_url' => $space . 'http://user:urlpass@127.0.0.1:1/api?api_key=APIKEY123']]]);
            Resilient::fake(['someone-else' => Response::fake(200)]);
            Resilient::preventStrayRequests();
            try {
                Resilient::client($name)->get('/x');
                $this->fail('a stray call went through');
            } catch (StrayRequest $e) {
                $this->assertStringContainsString('(GET http://127.0.0.1:1/api/x)', $e->getMessage());
                $this->assertShowsNoSecret($e->getMessage());
            }
        }
        foreach ([
            "\u{a0}http://user:urlpass@127.0.0.1:1/api" => 'http://127.0.0.1:1/api',
            " \u{2003}HTTPS://user:urlpass@h.example/p?api_key=APIKEY123 " => 'HTTPS://h.example/p',
            // Wherever one appears: a URL inside another's path.
            'http://127.0.0.1:1/api/ https://user:urlpass@example.com/x' => 'http://127.0.0.1:1/api/ https://example.com/x',
            'http://h.example/to/https://user:urlpass@example.com/x' => 'http://h.example/to/https://example.com/x',
            // The host shown is the one the client reads (the URL standard's: the authority
            // ends at the first '/', '?' or '#', its user-info at its last '@'); a password
            // holding a raw '/', '?' or '#' leaves no host and port there: nothing more shows.
            'http://user:url?pass@127.0.0.1:1/x' => 'http://[hidden]',
            'http://user:url#pass@127.0.0.1:1/x?api_key=APIKEY123' => 'http://[hidden]',
            'http://user:url?pass@127.0.0.1:1?api_key=APIKEY123@x' => 'http://[hidden]',
            'http://user:pa/ss@h.example/x' => 'http://[hidden]',
            'http://user:pa\\ss@h.example/x' => 'http://[hidden]',
            // (Read as host `user`, port 12, as the client reads and names it.)
            'http://user:12#pass@127.0.0.1:1/x' => 'http://user:12',
            // A query or fragment holding an '@' right after the host.
            'http://h.example?email=joe@example.com/more' => 'http://h.example',
            'http://127.0.0.1:8080?email=joe@example.com' => 'http://127.0.0.1:8080',
            'http://[::1]:8080?email=joe@example.com' => 'http://[::1]:8080',
            'https://user:urlpass@h.example:8443#joe@example.com' => 'https://h.example:8443',
        ] as $url => $safe) {
            $this->assertSame($safe, AttemptMade::safeUrl($url), $url);
        }
    }

    /** The recorded URL and query with whitespace around the base and the path are the real client's. */
    public function testTheRecordedUrlOfATrimmedBaseAndPathIsTheOneTheRealClientSends(): void
    {
        [$name, $key, $client] = $this->upstreamClient('secrets-trim');
        $this->up->script($key, [['status' => 200]], 'echo');
        foreach ([" \u{a0}", "\u{3000}"] as $space) {
            $this->boot(['clients' => [$name => ['base_url' => $space . $client['base_url'] . '/api/?v=2' . $space] + $client]]);
            Resilient::fake(['someone-else' => Response::fake(200)]);   // $name's calls reach the real client
            foreach (["\u{a0}/quote\u{a0}", ' quote?x=1 ', $space, "\u{2003}" . $this->up->base($key) . '/abs?y=1'] as $path) {
                $sent = Resilient::client($name)->get($path, ['postcode' => '10110'])->url();
                parse_str((string) parse_url($sent, PHP_URL_QUERY), $query);
                Resilient::assertSent(fn (RecordedRequest $r) => $r->path() === $path
                    && $r->url() === strtok($sent, '?')
                    && $r->query() === $query);
            }
        }
    }

    /**
     * A value quoted in a refusal shows up to its first character no name or word has
     * (as the extension's messages show names): `'Local'` whole, a Redis URL pasted into
     * RESILIENT_CONTEXT or a queue setting as `'redis…'`. Before, the whole value was shown.
     */
    public function testARefusedValueIsShownOnlyUpToItsFirstNonTokenCharacter(): void
    {
        $redis = 'redis://:s3cret@10.0.0.5:6379/0';
        try {
            ResilientManager::declareContext($redis);
            $this->assertSame(
                "resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got 'redis…'",
                ResilientManager::contextProblem(),
            );
            ResilientManager::declareContext('Local');
            $this->assertStringEndsWith("got 'Local'", (string) ResilientManager::contextProblem());
            ResilientManager::declareContext(str_repeat('a', 70));
            $this->assertStringEndsWith("got '" . str_repeat('a', 64) . "…'", (string) ResilientManager::contextProblem());
        } finally {
            ResilientManager::declareContext(null);
        }

        foreach ([
            [fn () => QueueSettings::deadlineMargin($redis), "resilient.queue.deadline_margin: must be a finite number of seconds >= 0", "got 'redis…'"],
            [fn () => QueueSettings::workerTimeout($redis), 'resilient.queue.worker_timeout', "got 'redis…'"],
            [fn () => QueueSettings::workerTimeout('5s'), 'resilient.queue.worker_timeout', "got '5s'"],
            // A number as written, whatever its characters.
            [fn () => QueueSettings::deadlineMargin(' -1.5'), 'resilient.queue.deadline_margin', "got ' -1.5'"],
            [fn () => ResilientManager::funnelArguments('resilient.funnels.sap', ['limit' => 2, $redis => 1]), 'resilient.funnels.sap', "unknown key 'redis…'"],
        ] as $i => [$refuse, $names, $shows]) {
            try {
                $refuse();
                $this->fail("case $i was accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertStringStartsWith($names, $e->getMessage(), "case $i");
                $this->assertStringContainsString($shows, $e->getMessage(), "case $i");
                $this->assertShowsNoSecret($e->getMessage(), "case $i");
            }
        }
    }

    /**
     * With `zend.exception_ignore_args=0` (PHP's built-in default, php.ini-development's, what
     * Ignition turns on) a trace's frames hold their arguments, which error trackers collect:
     * the package's frames hold options, headers, URLs and bodies as `SensitiveParameterValue`.
     */
    public function testTraceArgumentsHoldNoSecret(): void
    {
        $before = ini_set('zend.exception_ignore_args', '0');
        try {
            $name = $this->bootSecretClient();
            Resilient::fake([$name => fn () => throw new \RuntimeException('scripted')]);
            $frames = [];
            foreach ([
                'a scripted throw' => fn () => Resilient::client($name)->get('/quote?api_key=APIKEY123', ['q' => 'hunter2'], ['headers' => ['X-Api-Key' => 'hunter2']]),
                'a refused option' => fn () => Resilient::client($name)->post('/quote?api_key=APIKEY123', ['q' => 'hunter2'], ['headers' => ['X-Api-Key' => 'hunter2'], 'timout' => 1]),
                'a pool item' => fn () => Resilient::client($name)->pool(['a' => ['GET', '/quote?api_key=APIKEY123', ['headers' => ['X-Api-Key' => 'hunter2'], 'timout' => 1]]]),
                'Http::resilient()' => fn () => Http::resilient($name)->withToken('SECRETTOKEN')->get('/quote', ['api_key' => 'APIKEY123']),
                'a config section' => fn () => ResilientManager::sectionOf(['clients' => 'redis://:s3cret@h/0'], 'clients'),
            ] as $what => $call) {
                try {
                    $call();
                    $this->fail("$what did not throw");
                } catch (\RuntimeException|\ValueError|\InvalidArgumentException $e) {
                    foreach ($e->getTrace() as $frame) {
                        $class = $frame['class'] ?? '';
                        if (! in_array($class, [ClientFake::class, FakeClients::class, RecordedRequest::class, ResilientManager::class, ResilientHandler::class, AttemptMade::class, ResilientPendingRequest::class, GuzzleOptions::class, ConfiguredHeaders::class], true)) {
                            continue;   // Laravel's, the extension's, this test's closures
                        }
                        $frames["$class::{$frame['function']}"] = $frame['args'];
                        $this->assertShowsNoSecret(self::exported($frame['args']), "$what: $class::{$frame['function']}");
                    }
                }
            }
            foreach ([
                ClientFake::class . '::get' => [0, 1, 2],
                ClientFake::class . '::post' => [0, 1, 2],
                ClientFake::class . '::pool' => [0],
                ResilientHandler::class . '::__invoke' => [0, 1],
                ResilientManager::class . '::sectionOf' => [0],
                ResilientPendingRequest::class . '::send' => [1, 2],
            ] as $function => $sensitive) {
                $this->assertArrayHasKey($function, $frames, "$function is in a trace");
                foreach ($sensitive as $i) {
                    $this->assertInstanceOf(\SensitiveParameterValue::class, $frames[$function][$i], "$function argument $i");
                }
            }
        } finally {
            ini_set('zend.exception_ignore_args', (string) $before);
        }
    }

    /** Every argument, objects' properties included (a frame's RecordedRequest, Closure aside), as text. */
    private static function exported(mixed $value, int $depth = 0): string
    {
        if ($depth > 6) {
            return '';
        }
        if ($value instanceof \SensitiveParameterValue || $value instanceof \Closure) {
            return get_class($value);
        }
        if (is_object($value)) {
            $value = (array) $value;
        }
        if (is_array($value)) {
            $out = '';
            foreach ($value as $k => $v) {
                $out .= str_replace("\0", ':', (string) $k) . '=' . self::exported($v, $depth + 1) . ' ';   // private properties' keys hold NULs
            }

            return $out;
        }

        return is_scalar($value) ? (string) $value : get_debug_type($value);
    }
}
