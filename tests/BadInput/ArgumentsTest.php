<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 7 (arguments): a name too long, negative / NaN / INF / out-of-range numbers → a
 * \ValueError or \InvalidArgumentException whose message names the argument; the process goes
 * on normally (each case runs in a child whose exit code is checked, so a crash cannot hide).
 */
final class ArgumentsTest extends TestCase
{
    /** @return iterable<string,array{string,string}> code, argument name the message must contain */
    public static function badArguments(): iterable
    {
        $long = str_repeat('n', 65);
        yield 'funnel name too long' => ["new Resilient\\Funnel('$long', limit: 1);", 'name'];
        yield 'funnel name empty' => ["new Resilient\\Funnel('', limit: 1);", 'name'];
        yield 'budget name too long' => ["new Resilient\\RetryBudget('$long');", 'name'];
        yield 'limit negative' => ["new Resilient\\Funnel('a', limit: -1);", 'limit'];
        yield 'limit zero' => ["new Resilient\\Funnel('a', limit: 0);", 'limit'];
        yield 'limit above 64' => ["new Resilient\\Funnel('a', limit: 65);", 'limit'];
        yield 'reserve negative' => ["new Resilient\\Funnel('a', limit: 3, reserve: -1);", 'reserve'];
        yield 'reserve above limit' => ["new Resilient\\Funnel('a', limit: 3, reserve: 4);", 'reserve'];
        yield 'lease negative' => ["new Resilient\\Funnel('a', limit: 3, lease: -1.0);", 'lease'];
        yield 'lease NaN' => ["new Resilient\\Funnel('a', limit: 3, lease: NAN);", 'lease'];
        yield 'lease INF' => ["new Resilient\\Funnel('a', limit: 3, lease: INF);", 'lease'];
        yield 'ratio negative' => ["new Resilient\\RetryBudget('a', ratio: -0.1);", 'ratio'];
        yield 'ratio NaN' => ["new Resilient\\RetryBudget('a', ratio: NAN);", 'ratio'];
        yield 'ratio INF' => ["new Resilient\\RetryBudget('a', ratio: INF);", 'ratio'];
        yield 'floor negative' => ["new Resilient\\RetryBudget('a', floor: -1);", 'floor'];
        yield 'window zero' => ["new Resilient\\RetryBudget('a', window: 0.0);", 'window'];
        yield 'window negative' => ["new Resilient\\RetryBudget('a', window: -60.0);", 'window'];
        yield 'window NaN' => ["new Resilient\\RetryBudget('a', window: NAN);", 'window'];
        yield 'window INF' => ["new Resilient\\RetryBudget('a', window: INF);", 'window'];
        yield 'within negative' => ['Resilient\\Deadline::within(-1.0, fn () => 1);', 'seconds'];
        yield 'within NaN' => ['Resilient\\Deadline::within(NAN, fn () => 1);', 'seconds'];
        yield 'within INF' => ['Resilient\\Deadline::within(INF, fn () => 1);', 'seconds'];
        yield 'cap NaN' => ['Resilient\\Deadline::cap(NAN);', 'seconds'];
        yield 'cap negative' => ['Resilient\\Deadline::cap(-5.0);', 'seconds'];
        yield 'context timeout NaN' => ['Resilient\\Context::timeout(NAN);', 'seconds'];
        yield 'context timeout negative' => ['Resilient\\Context::timeout(-1.0);', 'seconds'];
        yield 'context connect INF' => ['Resilient\\Context::connectTimeout(INF);', 'seconds'];
        yield 'method of 33 characters' => ['(new Resilient\\Client("m", ["base_url" => "http://127.0.0.1:9"]))->request(str_repeat("G", 33), "/");', 'method'];
    }

    /**
     * A huge number is refused with the argument's real range, not the width of the integer the
     * extension converts it to; a positive duration too small to be one is not called zero.
     *
     * @return iterable<string,array{string,string}> code, the message it must give
     */
    public static function outOfRangeMessages(): iterable
    {
        yield 'limit PHP_INT_MAX' => ["new Resilient\\Funnel('a', PHP_INT_MAX);", 'limit: must be between 1 and 64, got ' . PHP_INT_MAX];
        yield 'reserve PHP_INT_MAX' => ["new Resilient\\Funnel('a', 3, PHP_INT_MAX);", 'reserve: must be between 0 and limit - 1 (2), got ' . PHP_INT_MAX];
        // The range with the limit's number, below 0 and past 63 too (it said 0 and 63).
        yield 'reserve -1' => ["new Resilient\\Funnel('a', 4, -1);", 'reserve: must be between 0 and limit - 1 (3), got -1'];
        yield 'client reserve 64' => ['new Resilient\\Client("t", ["funnel" => ["limit" => 4, "reserve" => 64]]);', "option 'funnel.reserve': must be between 0 and limit - 1 (3), got 64"];
        yield 'client reserve before its limit' => ['new Resilient\\Client("t", ["funnel" => ["reserve" => -1, "limit" => 4]]);', "option 'funnel.reserve': must be between 0 and limit - 1 (3), got -1"];
        yield 'client reserve of a learned limit' => ['new Resilient\\Client("t", ["funnel" => ["limit" => "auto", "max" => 8, "reserve" => 8]]);', "option 'funnel.reserve': must be between 0 and limit - 1 (7), got 8"];
        yield 'floor PHP_INT_MAX' => ["new Resilient\\RetryBudget('a', 0.1, PHP_INT_MAX);", 'floor: must be between 0 and 1048575, got ' . PHP_INT_MAX];
        // A bucket of a longer window could fill (each counts up to 2^20 - 1) and stop counting.
        yield 'window 1e300' => ["new Resilient\\RetryBudget('a', 0.1, 5, 1e300);", 'window: must be at most 600 seconds, got 1e300'];
        yield 'window of a day' => ["new Resilient\\RetryBudget('a', 0.1, 5, 86400.0);", 'window: must be at most 600 seconds, got 86400'];
        yield 'client budget window 601' => ['new Resilient\\Client("t", ["budget" => ["window" => 601]]);', "option 'budget.window': must be at most 600 seconds, got 601"];
        yield 'lease 1e-300' => ["new Resilient\\Funnel('a', 3, 0, 1e-300);", 'lease: must be at least 1e-9 seconds, got 1e-300'];
        yield 'lease 5e-10 (a Duration rounds it to 1 ns)' => ["new Resilient\\Funnel('a', 3, 0, 5e-10);", 'lease: must be at least 1e-9 seconds, got 5e-10'];
        // Shown short, not with all 301 digits.
        yield 'Deadline::cap 1e300' => ['Resilient\\Deadline::cap(1e300);', 'seconds: must be at most 31536000 seconds, got 1e300'];
        // Every timeout under the client's 1 ms gets the same words, however small.
        $ms = 'must be at least 0.001 seconds, got ';
        yield 'timeout 1e-10' => ['new Resilient\\Client("t", ["timeout" => 1e-10]);', "option 'timeout': $ms"];
        yield 'timeout 0.0005' => ['new Resilient\\Client("t", ["timeout" => 0.0005]);', "option 'timeout': {$ms}0.0005"];
        yield 'connect_timeout 1e-12' => ['new Resilient\\Client("t", ["connect_timeout" => 1e-12]);', "option 'connect_timeout': $ms"];
        yield 'deadline 1e-10' => ['new Resilient\\Client("t", ["deadline" => 1e-10]);', "option 'deadline': $ms"];
        yield 'request timeout 1e-10' => ['(new Resilient\\Client("t", ["base_url" => "http://127.0.0.1:9"]))->get("/", null, ["timeout" => 1e-10]);', "option 'timeout': $ms"];
        yield 'Context::timeout 1e-300' => ['Resilient\\Context::timeout(1e-300);', "seconds: $ms"];
        yield 'Context::connectTimeout 0' => ['Resilient\\Context::connectTimeout(0);', "seconds: {$ms}0"];
    }

    /** @dataProvider outOfRangeMessages */
    public function testAnOutOfRangeNumberGetsTheArgumentsRealRange(string $code, string $message): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertStringContainsString($message, $result['message']);
    }

    /** @dataProvider badArguments */
    public function testBadArgumentIsAClearError(string $code, string $argument): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertContains($result['class'], [\ValueError::class, \InvalidArgumentException::class], json_encode($result));
        $this->assertStringContainsStringIgnoringCase($argument, $result['message'], "the message must name `$argument`");
    }

    public function testNamesUpToTheLimitAreAccepted(): void
    {
        $name = str_repeat('n', 60) . bin2hex(random_bytes(2));
        $this->assertSame(64, strlen($name));
        $f = new \Resilient\Funnel($name, limit: 1);
        $this->assertSame($name, $f->name());
        $this->assertSame(0, $f->inFlight());
    }

    /**
     * The longest `timeout` (a year) with a circuit breaker: its probe's ticket is given up
     * after `timeout` + 0.25 s, kept within a year. Before, the client was refused naming
     * `probe_timeout`, which is no option.
     */
    public function testTheLongestTimeoutIsAcceptedWithACircuit(): void
    {
        $c = new \Resilient\Client('year-' . bin2hex(random_bytes(3)), [
            'base_url' => 'http://127.0.0.1:9',
            'timeout' => 31536000,
            'circuit' => ['failure_ratio' => 0.5],
        ]);
        $this->assertInstanceOf(\Resilient\Client::class, $c);
    }

    /**
     * The longest `timeout` with a funnel and no `lease`: the default lease (twice the timeout)
     * is kept within a year, whichever option comes first. Before, `ValueError` naming
     * `funnel.lease`, an option not given (or naming `lease` with the funnel first).
     */
    public function testTheLongestTimeoutIsAcceptedWithAFunnel(): void
    {
        $options = ['base_url' => 'http://127.0.0.1:9', 'timeout' => 31536000, 'funnel' => ['limit' => 2]];
        foreach ([$options, array_reverse($options, true)] as $given) {
            $c = new \Resilient\Client('year-' . bin2hex(random_bytes(3)), $given);
            $this->assertInstanceOf(\Resilient\Client::class, $c, implode(', ', array_keys($given)));
        }
    }

    /**
     * A pool item's method, path and options may be PHP references (an array built with `&`, or
     * left so by `foreach (... as &$r)`): they are their values. Before, a referenced method or
     * path was refused as a wrong shape.
     */
    public function testAPoolItemsPartsMayBeReferences(): void
    {
        $method = 'GET';
        $path = '/x';
        $options = null;
        $c = new \Resilient\Client('refs-' . bin2hex(random_bytes(3)), ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1]);
        $out = $c->pool(['a' => [&$method, &$path, &$options], 'b' => [&$method, '/y']]);
        $this->assertSame(['a', 'b'], array_keys($out));
        // Port 9 refuses the connection: each item is sent, and fails as an upstream failure.
        $this->assertInstanceOf(\Resilient\UpstreamFailed::class, $out['a']);
        $this->assertInstanceOf(\Resilient\UpstreamFailed::class, $out['b']);
    }

    /**
     * A multipart part's bad header is named by the part's path. Before, `option 'headers.X-A'`,
     * which sent the reader to the request's own headers.
     */
    public function testAMultipartPartsBadHeaderIsNamedByItsPart(): void
    {
        $c = new \Resilient\Client('mp-' . bin2hex(random_bytes(3)), ['base_url' => 'http://127.0.0.1:9']);
        $part = ['name' => 'a', 'contents' => 'x', 'headers' => ['X-A' => "1\n2"]];
        try {
            $c->request('POST', '/x', ['multipart' => [$part]]);
            $this->fail('a header value with a line break was sent');
        } catch (\ValueError $e) {
            $this->assertSame(
                "option 'multipart.0.headers.X-A': contains characters not allowed in a header value (control characters or line breaks)",
                $e->getMessage(),
            );
        }
    }

    /**
     * Numbers arrive as PHP's own functions take them (docs/errors.md): numeric strings and
     * integral floats are accepted; anything else is a \TypeError in PHP's own words, naming the
     * function, the argument and the type given.
     */
    public function testNumericArgumentsFollowPhpsCoerciveRule(): void
    {
        $this->assertSame(0.5, \Resilient\Deadline::cap('0.5'));
        $this->assertTrue(\Resilient\Deadline::within('0.5', fn () => \Resilient\Deadline::remaining() > 0.4));
        $this->assertSame(2.0, \Resilient\Context::timeout('2'));
        $this->assertSame(1.5, \Resilient\Context::connectTimeout(' 1.5'));
        $this->assertSame(3, \Resilient\Context::maxAttempts('3'));
        $this->assertSame(3, \Resilient\Context::maxAttempts(3.0));
        $this->assertSame(201, \Resilient\Response::fake('201')->status());
        $this->assertSame(200, \Resilient\Response::fake()->status());
        $this->assertSame('', \Resilient\Response::fake(200, null)->body(), 'a null body is the default, as a null status is');
        $this->assertSame([], (new \Resilient\Client('coerce'))->pool([], '2'));
        foreach ([
            'Resilient\Deadline::cap(): Argument #1 ($seconds) must be of type float, string given' => fn () => \Resilient\Deadline::cap('abc'),
            'Resilient\Deadline::within(): Argument #1 ($seconds) must be of type float, array given' => fn () => \Resilient\Deadline::within([], fn () => 1),
            'Resilient\Context::connectTimeout(): Argument #1 ($seconds) must be of type float, bool given' => fn () => \Resilient\Context::connectTimeout(true),
            'Resilient\Context::maxAttempts(): Argument #1 ($attempts) must be of type int, float given' => fn () => \Resilient\Context::maxAttempts(2.5),
            'Resilient\Response::fake(): Argument #1 ($status) must be of type int, string given' => fn () => \Resilient\Response::fake('ok'),
            'Resilient\Client::pool(): Argument #2 ($concurrency) must be of type int, stdClass given' => fn () => (new \Resilient\Client('coerce'))->pool([], new \stdClass()),
        ] as $expected => $call) {
            try {
                $call();
                $this->fail("accepted: $expected");
            } catch (\TypeError $e) {
                $this->assertSame($expected, $e->getMessage());
            }
        }
    }

    /**
     * Lists inside the options whose keys mean nothing (a header's values, `proxy.no`, a
     * `[path, password]` pair): a key that is not valid UTF-8 is no reason to fail, and must
     * never reach PHP as "Rust panic".
     *
     * @return iterable<string,array{string}>
     */
    public static function listsWithNonUtf8Keys(): iterable
    {
        $client = 'new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"] + ';
        yield 'proxy.no' => [$client . '["proxy" => ["no" => ["h\\xff" => "internal.example"]]]);'];
        yield 'header values (client)' => [$client . '["headers" => ["X-A" => ["k\\xff" => "v"]]]);'];
        yield 'cert pair (client)' => [$client . '["cert" => ["k\\xff" => "/nonexistent/cert.pem", "x" => "pw"]]);'];
        yield 'ssl_key pair (client)' => [$client . '["ssl_key" => ["k\\xff" => "/nonexistent/key.pem", "x" => "pw"]]);'];
        yield 'header values (Response::fake)' => ['Resilient\\Response::fake(200, "", ["X-A" => ["k\\xff" => "v"]]);'];
    }

    /** @dataProvider listsWithNonUtf8Keys */
    public function testAListsKeysAreIgnoredNeverAPanic(string $code): void
    {
        $r = PhpProcess::runScript('expect_throw.php', [$code . ' return "accepted";'], [], 20);
        $this->assertSame(0, $r->exitCode, "the child must not crash:\n" . $r->describe());
        $this->assertStringNotContainsStringIgnoringCase('panic', $r->stdout . $r->stderr, $r->describe());
        $result = $r->json();
        if ($result['threw']) {
            // Only a file that does not exist may refuse these, by a message naming the option.
            $this->assertSame(\ValueError::class, $result['class'], json_encode($result));
            $this->assertMatchesRegularExpression("/option '(cert|ssl_key)'/", $result['message']);
        }
    }

    /**
     * A secret put where it does not belong: a whole header line where a name goes (curl's
     * style), a [path, password] pair given the other way round. The error names the header
     * or the option, and never shows the secret.
     *
     * @return iterable<string,array{string,string}> code, what the message must name
     */
    public static function secretsInTheWrongPlace(): iterable
    {
        $client = 'new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"] + ';
        yield 'header name (client)' => [$client . '["headers" => ["Authorization: Bearer s3cr3tT0k" => "x"]]);', 'Authorization'];
        yield 'header value of a wrong type' => [$client . '["headers" => ["Authorization: Bearer s3cr3tT0k" => 1.5]]);', 'Authorization'];
        yield 'header name (request)' => ['(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->get("/", [], ["headers" => ["Authorization: Bearer s3cr3tT0k" => "x"]]);', 'Authorization'];
        // A list of curl-style lines: the keys are 0, 1, ..., no header name (before: sent as
        // a header named `0`, the request unauthenticated).
        yield 'header lines (client)' => [$client . '["headers" => ["Authorization: Bearer s3cr3tT0k"]]);', "'headers.0'"];
        yield 'header lines (request)' => ['(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->get("/", [], ["headers" => ["X-A: 1", "Authorization: Bearer s3cr3tT0k"]]);', "'headers.0'"];
        yield 'header lines (part)' => ['(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->post("/", [], ["multipart" => [["name" => "a", "contents" => "x", "headers" => ["Authorization: Bearer s3cr3tT0k"]]]]);', "'multipart.0.headers.0'"];
        yield 'header lines (Response::fake)' => ['Resilient\\Response::fake(200, "", ["Authorization: Bearer s3cr3tT0k"]);', "'headers.0'"];
        yield 'option key' => [$client . '["Bearer s3cr3tT0k" => 1]);', 'Bearer'];
        yield 'header name (Response::fake)' => ['Resilient\\Response::fake(200, "", ["Authorization: Bearer s3cr3tT0k" => "x"]);', 'Authorization'];
        yield 'header value (Response::fake)' => ['Resilient\\Response::fake(200, "", ["Authorization: Bearer s3cr3tT0k" => [1.5]]);', 'Authorization'];
        yield 'cert pair swapped' => [$client . '["cert" => ["s3cr3tPw", PHP_BINARY]]);', "'cert'"];
        yield 'ssl_key pair swapped' => [$client . '["cert" => PHP_BINARY, "ssl_key" => ["s3cr3tPw", PHP_BINARY]]);', "'ssl_key'"];
        yield 'cert pair swapped, neither a file' => [$client . '["cert" => ["s3cr3tPw", "/nonexistent/cert.pem"]]);', "'cert'"];
        // A value from the wrong environment variable (a Redis URL where a word belongs): the
        // word-like start of the value is shown, up to its first character no such word has.
        yield 'Redis URL as on_backend_error' => [$client . '["on_backend_error" => "redis://:s3cr3tPw@cache:6379"]);', "got \"redis…\""];
        yield 'Redis URL as context' => [$client . '["context" => "redis://:s3cr3tPw@cache:6379"]);', "got 'redis…'"];
        yield 'URL as a redirect protocol' => [$client . '["allow_redirects" => ["protocols" => ["https://u:s3cr3tPw@h"]]]);', "got 'https…'"];
        // A pool keyed by URL (array_combine($urls, ...)): the key shows as URLs do in messages.
        $pool = '(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->pool(';
        yield 'pool key a URL' => [$pool . '["http://u:s3cr3tPw@h/x?token=s3cr3tQ" => ["GET"]]);', "pool request 'http://h/x': must be"];
        yield 'pool key a path with a query' => [$pool . '["/x?token=s3cr3tQ" => ["GET", "/x", ["timout" => 1]]]);', "pool request '/x…': option 'timout'"];
    }

    /** @dataProvider secretsInTheWrongPlace */
    public function testASecretInTheWrongPlaceIsNeverShown(string $code, string $named): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertStringContainsString($named, $result['message']);
        $this->assertStringNotContainsString('s3cr3t', $result['message']);
    }

    /**
     * A `string`, `callable` or `bool` parameter given another type: a `\TypeError` in PHP's
     * own words, naming the method, the argument and both types; a string that is not UTF-8, a
     * `\ValueError` saying so.
     *
     * @return iterable<string,array{string,string,string}> code, class, message
     */
    public static function wronglyTypedArguments(): iterable
    {
        $client = '(new Resilient\\Client("typed", ["base_url" => "http://127.0.0.1:9"]))';
        yield 'client name' => ['new Resilient\\Client(123);', \TypeError::class, 'Resilient\\Client::__construct(): Argument #1 ($name) must be of type string, int given'];
        yield 'client name not UTF-8' => ['new Resilient\\Client("caf\\xE9");', \ValueError::class, 'Resilient\\Client::__construct(): Argument #1 ($name) is not valid UTF-8'];
        yield 'path' => [$client . '->get(["x"]);', \TypeError::class, 'Resilient\\Client::get(): Argument #1 ($path) must be of type string, array given'];
        yield 'path not UTF-8' => [$client . '->get("/\\xff");', \ValueError::class, 'Resilient\\Client::get(): Argument #1 ($path) is not valid UTF-8'];
        yield 'method' => [$client . '->request(1, "/");', \TypeError::class, 'Resilient\\Client::request(): Argument #1 ($method) must be of type string, int given'];
        yield 'post path' => [$client . '->post(null);', \TypeError::class, 'Resilient\\Client::post(): Argument #1 ($path) must be of type string, null given'];
        yield 'within fn' => ['Resilient\\Deadline::within(1, "nope");', \TypeError::class, 'Resilient\\Deadline::within(): Argument #2 ($fn) must be of type callable, string given'];
        yield 'run fallback' => ['(new Resilient\\Funnel("typed", 4))->run(fn () => 1, "nope");', \TypeError::class, 'Resilient\\Funnel::run(): Argument #2 ($fallback) must be of type ?callable, string given'];
        yield 'funnel share' => ['new Resilient\\Funnel("typed", 4, 1, null, "yes");', \TypeError::class, 'Resilient\\Funnel::__construct(): Argument #5 ($share) must be of type ?bool, string given'];
        yield 'tryAcquire' => ['(new Resilient\\Funnel("typed", 4))->tryAcquire("abc");', \TypeError::class, 'Resilient\\Funnel::tryAcquire(): Argument #1 ($background) must be of type ?bool, string given'];
        yield 'budget name' => ['new Resilient\\RetryBudget(1.5);', \TypeError::class, 'Resilient\\RetryBudget::__construct(): Argument #1 ($name) must be of type string, float given'];
        yield 'metrics reset' => ['Resilient\\Metrics::reset([]);', \TypeError::class, 'Resilient\\Metrics::reset(): Argument #1 ($name) must be of type string, array given'];
        yield 'response header' => ['Resilient\\Response::fake(200)->header(5);', \TypeError::class, 'Resilient\\Response::header(): Argument #1 ($name) must be of type string, int given'];
        // Array parameters (ext-php-rs's own conversion said only "Invalid value given for argument").
        yield 'post json' => [$client . '->post("/x", "str");', \TypeError::class, 'Resilient\\Client::post(): Argument #2 ($json) must be of type ?array, string given'];
        yield 'get query' => [$client . '->get("/x", 5);', \TypeError::class, 'Resilient\\Client::get(): Argument #2 ($query) must be of type ?array, int given'];
        yield 'get options' => [$client . '->get("/x", null, "o");', \TypeError::class, 'Resilient\\Client::get(): Argument #3 ($options) must be of type ?array, string given'];
        yield 'request options' => [$client . '->request("GET", "/x", 1.5);', \TypeError::class, 'Resilient\\Client::request(): Argument #3 ($options) must be of type ?array, float given'];
        yield 'pool requests' => [$client . '->pool("x");', \TypeError::class, 'Resilient\\Client::pool(): Argument #1 ($requests) must be of type array, string given'];
        yield 'client options' => ['new Resilient\\Client("typed", new ArrayObject());', \TypeError::class, 'Resilient\\Client::__construct(): Argument #2 ($options) must be of type ?array, ArrayObject given'];
        // A string is a proxy for every scheme: said beside the array (before: "array").
        yield 'proxy' => ['new Resilient\\Client("typed", ["proxy" => 5]);', \TypeError::class, "option 'proxy' must be of type string|array, int given"];
        yield 'fake headers' => ['Resilient\\Response::fake(200, "", "h");', \TypeError::class, 'Resilient\\Response::fake(): Argument #3 ($headers) must be of type ?array, string given'];
        yield 'json key' => ['Resilient\\Response::fake(200, "{}")->json([]);', \TypeError::class, 'Resilient\\Response::json(): Argument #1 ($key) must be of type string, array given'];
        // The @internal bench helpers, public all the same.
        yield 'recordSynthetic name' => ['Resilient\\Metrics::recordSynthetic("caf\\xE9", 1);', \ValueError::class, 'Resilient\\Metrics::recordSynthetic(): Argument #1 ($name) is not valid UTF-8'];
        yield 'recordSynthetic calls' => ['Resilient\\Metrics::recordSynthetic("x", "abc");', \TypeError::class, 'Resilient\\Metrics::recordSynthetic(): Argument #2 ($calls) must be of type int, string given'];
        yield 'learnSynthetic seconds' => ['Resilient\\Funnel::learnSynthetic("x", 1, "abc");', \TypeError::class, 'Resilient\\Funnel::learnSynthetic(): Argument #3 ($seconds) must be of type float, string given'];
        yield 'benchBackend options' => ['Resilient\\Client::benchBackend("x", 5, "funnel", 1);', \TypeError::class, 'Resilient\\Client::benchBackend(): Argument #2 ($options) must be of type array, int given'];
        yield 'benchBackend op' => ['Resilient\\Client::benchBackend("x", [], "\\xff", 1);', \ValueError::class, 'Resilient\\Client::benchBackend(): Argument #3 ($op) is not valid UTF-8'];
    }

    /** @dataProvider wronglyTypedArguments */
    public function testAWronglyTypedArgumentGetsPhpsOwnWording(string $code, string $class, string $message): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertSame([$class, $message], [$result['class'], $result['message']]);
    }

    /**
     * Guzzle's and Symfony's `get($uri, $options)` habit: options given where `get()` takes the
     * query would be sent in the URL, the bearer token or `auth`'s password with them. Refused
     * before anything is sent, the secret not shown; a parameter of the same name that holds no
     * array is a query parameter like any other (the call goes out and finds nothing listening).
     */
    public function testRequestOptionsGivenAsTheQueryAreRefusedNotSentInTheUrl(): void
    {
        $client = '(new Resilient\\Client("guzzle-habit", ["base_url" => "http://127.0.0.1:9", "max_attempts" => 1]))';
        $message = fn (string $method, string $key) => "Resilient\\Client::$method(): Argument #2 (\$query) holds the key '$key' with an array, as request options do: the options are argument #3 (\$options); as a query they would be sent in the URL (a query parameter of that name goes in \$options['query'])";
        foreach ([
            ['get', 'headers', '["headers" => ["Authorization" => "Bearer s3cr3tT0k"]]'],
            ['get', 'auth', '["auth" => ["user", "s3cr3tT0k"]]'],
            ['get', 'cert', '["cert" => ["/etc/c.pem", "s3cr3tT0k"]]'],
            ['head', 'query', '["page" => 1, "query" => ["token" => "s3cr3tT0k"]]'],
        ] as [$method, $key, $query]) {
            $result = $this->thrownInAChild("{$client}->$method('/me', $query);");
            $this->assertSame([\ValueError::class, $message($method, $key)], [$result['class'], $result['message']]);
        }
        $sent = $this->thrownInAChild("{$client}->get('/me', ['headers' => 'plain', 'json' => 1]);");
        $this->assertSame('Resilient\\UpstreamFailed', $sent['class'], json_encode($sent));
        // As the message says: a parameter of that name in option 'query'.
        $sent = $this->thrownInAChild("{$client}->get('/me', [], ['query' => ['headers' => ['a' => 1]]]);");
        $this->assertSame('Resilient\\UpstreamFailed', $sent['class'], json_encode($sent));
    }

    /**
     * PHP lets code call `__construct()` again on a live object; the Rust value behind it was
     * then replaced in place, also while a method of it ran (a client re-constructed by its own
     * `on_attempt` in mid-call went on under the new name, with references into the dropped
     * value). A second construction is refused and the object stays what it was.
     */
    public function testAnObjectIsConstructedOnlyOnce(): void
    {
        foreach ([
            'Client' => ["new Resilient\\Client('first')", "'second'"],
            'Funnel' => ["new Resilient\\Funnel('first', 2)", "'second', 3"],
            'RetryBudget' => ["new Resilient\\RetryBudget('first')", "'second'"],
        ] as $class => [$make, $again]) {
            $r = PhpProcess::runScript('expect_throw.php', ["\$o = $make; try { \$o->__construct($again); return 'accepted'; } "
                . 'catch (Error $e) { return json_encode([get_class($e), $e->getMessage(), $o->name()]); }'], [], 20);
            $this->assertSame(0, $r->exitCode, $r->describe());
            $this->assertSame(
                ['Error', "Resilient\\$class::__construct(): the object is constructed already: make a new one", 'first'],
                json_decode((string) $r->json()['returned'], true) ?? $r->json()['returned'],
                $class,
            );
        }
        $code = <<<'PHP'
            $seen = [];
            $c = new Resilient\Client('first', ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 3, 'timeout' => 0.2,
                'backoff' => ['base' => 0.001, 'cap' => 0.002], 'budget' => ['floor' => 100],
                'on_attempt' => function (array $a) use (&$c, &$seen) {
                    $seen[] = $a['client'];
                    try { $c->__construct('second'); } catch (Error $e) { $seen[] = $e->getMessage(); }
                }]);
            try { $c->get('/x'); } catch (Resilient\Unavailable) {}
            return json_encode([$c->name(), array_values(array_unique($seen))]);
            PHP;
        $r = PhpProcess::runScript('expect_throw.php', [$code], [], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame(['first', ['first', 'Resilient\\Client::__construct(): the object is constructed already: make a new one']], json_decode($r->json()['returned'], true));
    }

    public function testTheProcessGoesOnAfterABadArgument(): void
    {
        $code = 'try { new Resilient\Funnel("a", limit: -1); } catch (Throwable) {} '
            . '$l = (new Resilient\Funnel("after-bad-arg-" . getmypid(), limit: 1))->tryAcquire(); return $l !== null;';
        $r = PhpProcess::runScript('expect_throw.php', [$code], [], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame(['threw' => false, 'returned' => true], $r->json());
    }

    /**
     * Runs `$code` in a child process (so a crash cannot hide), which must throw: what it threw.
     *
     * @return array{threw: bool, class: string, parents: list<string>, message: string}
     */
    /**
     * Two keys of one `headers` array that name the same header in another case (`Host` and
     * `host`): both were sent, two Host lines (a server must answer 400; a proxy and the server
     * behind it may each take another), two Authorization lines, two Idempotency-Keys (and the
     * POST retried on either). Refused, naming both; several values go as a list.
     *
     * @return iterable<string,array{string,string}> code, the message it must give
     */
    public static function headerNamesInTwoCases(): iterable
    {
        $client = 'new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9", "headers" => ["Host" => "a.example", "host" => "b.example"]]);';
        yield 'client headers' => [$client, "option 'headers': 'Host' and 'host' name the same header (give it once; several values as a list)"];
        yield 'request headers' => ['(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->post("/", [], ["headers" => ["Idempotency-Key" => "a", "idempotency-key" => "b"]]);', "option 'headers': 'Idempotency-Key' and 'idempotency-key' name the same header"];
        yield 'part headers' => ['(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"]))->post("/", [], ["multipart" => [["name" => "a", "contents" => "x", "headers" => ["Content-Type" => "text/plain", "CONTENT-TYPE" => "text/html"]]]]);', "option 'multipart.0.headers': 'Content-Type' and 'CONTENT-TYPE' name the same header"];
    }

    /** @dataProvider headerNamesInTwoCases */
    public function testAHeaderNamedTwiceInTwoCasesIsRefused(string $code, string $message): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertSame('ValueError', $result['class']);
        $this->assertStringStartsWith($message, $result['message']);
    }

    /**
     * More header values than any server takes (the client's and a request's together) are
     * refused up front. Past 24,576 they made a Rust panic (the HTTP crate's header map is
     * full), thrown into PHP as `Error: Rust panic`.
     *
     * @return iterable<string,array{string,string}> code, the message it must give
     */
    public static function tooManyHeaderValues(): iterable
    {
        $client = '(new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9"%s]))';
        $many = fn (string $prefix, int $n): string => "array_combine(array_map(fn (\$i) => \"$prefix-\$i\", range(1, $n)), array_fill(0, $n, \"v\"))";
        yield 'one request header with 24,577 values' => [sprintf($client, '') . '->get("/", null, ["headers" => ["X" => array_fill(0, 24577, "v")]]);', "option 'headers': more than 1000 header values"];
        yield 'the client\'s and the request\'s, 16,000 each' => [sprintf($client, ', "headers" => ' . $many('X', 16000)) . '->get("/", null, ["headers" => ' . $many('Y', 16000) . ']);', "option 'headers': more than 1000 header values"];
        yield 'the client\'s 600 and the request\'s 600' => [sprintf($client, ', "headers" => ' . $many('X', 600)) . '->get("/", null, ["headers" => ' . $many('Y', 600) . ']);', "option 'headers': more than 1000 header values (the client's 600 and the request's 600)"];
        yield 'a client with 32,769' => [sprintf($client, ', "headers" => ["X" => array_fill(0, 32769, "v")]') . ';', "option 'headers': more than 1000 header values"];
        yield 'a pool item' => [sprintf($client, '') . '->pool([["GET", "/", ["headers" => ["X" => array_fill(0, 1001, "v")]]]]);', "pool request '0': option 'headers': more than 1000 header values"];
        yield 'validateRequest' => [sprintf($client, '') . '->validateRequest("GET", "/", ["headers" => ["X" => array_fill(0, 24577, "v")]]);', "option 'headers': more than 1000 header values"];
    }

    /** @dataProvider tooManyHeaderValues */
    public function testTooManyHeaderValuesAreRefusedNotAPanic(string $code, string $message): void
    {
        $result = $this->thrownInAChild($code);
        $this->assertSame('ValueError', $result['class'], json_encode($result));
        $this->assertStringStartsWith($message, $result['message']);
    }

    /** A thousand values in all (the client's and the request's) are sent. */
    public function testAThousandHeaderValuesAreAccepted(): void
    {
        $code = '$c = new Resilient\\Client("k", ["base_url" => "http://127.0.0.1:9", "headers" => ["X" => array_fill(0, 500, "v")]]);'
            . ' $c->validateRequest("GET", "/", ["headers" => ["Y" => array_fill(0, 500, "v")]]); throw new LogicException("validated");';
        $result = $this->thrownInAChild($code);
        $this->assertSame(['LogicException', 'validated'], [$result['class'], $result['message']], json_encode($result));
    }

    private function thrownInAChild(string $code): array
    {
        $r = PhpProcess::runScript('expect_throw.php', [$code . ' return "accepted";'], [], 20);
        $this->assertSame(0, $r->exitCode, "the child must not crash:\n" . $r->describe());
        $result = $r->json();
        $this->assertTrue($result['threw'], "accepted: $code");

        return $result;
    }
}
