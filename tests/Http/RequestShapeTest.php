<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

/**
 * The request the upstream receives is the one PHP's own functions describe: `query` and
 * `form` as `http_build_query`, `json` as `json_encode`; a verb's `$data` and the options'
 * `query` are merged (the options' key wins), and a key they give replaces that key in the path's
 * own query; a `$json` argument beside another body is refused.
 */
final class RequestShapeTest extends HttpTestCase
{
    private const MIXED = [
        'name' => 'café & co',
        'marks' => "~*-._!'()+/",
        'page' => 2,
        'ratio' => 0.5,
        'whole' => 2.0,
        // as `precision` writes them, as http_build_query does (not 0.30000000000000004)
        'sum' => 0.1 + 0.2,
        'huge' => 1e100,
        'on' => true,
        'off' => false,
        'skip' => null,
        'ids' => [3, 1],
        'filter' => ['status' => 'open', 'tags' => ['a b', 'c']],
    ];

    public function testQueryAndFormAreWhatHttpBuildQueryWrites(): void
    {
        $key = $this->up->key('shapeq');
        $this->up->script($key, [['status' => 200], ['status' => 200]]);
        $client = $this->client($key);
        $client->request('GET', '/q', ['query' => self::MIXED]);
        $client->request('POST', '/f', ['form' => self::MIXED]);
        [$get, $post] = $this->up->attempts($key, 2);
        parse_str($get['query'], $seenQuery);
        parse_str($post['body'], $seenForm);
        parse_str(http_build_query(self::MIXED), $expected);
        $this->assertSame($expected, $seenQuery);
        $this->assertSame($expected, $seenForm);
        $this->assertSame(urldecode(http_build_query(self::MIXED)), urldecode($get['query']));
        // Byte for byte as Guzzle's form_params and its query option write them.
        $this->assertSame(http_build_query(self::MIXED), $post['body']);
        $this->assertSame(http_build_query(self::MIXED, '', '&', PHP_QUERY_RFC3986), $get['query']);
    }

    /** A float header value or multipart contents is written as PHP (and Guzzle) write it, as in `query` and `form`. */
    public function testFloatHeadersAndPartsAreWhatPhpWrites(): void
    {
        $key = $this->up->key('shapefloat');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key)->post('/p', [], [
            'headers' => ['X-Request-Id' => 0.1 + 0.2],
            'multipart' => [['name' => 'n', 'contents' => 1e25]],
        ]);
        $seen = $this->up->attempts($key, 1)[0];
        $this->assertSame('0.3', $seen['headers']['x-request-id'] ?? null, json_encode($seen['headers']));
        $this->assertStringContainsString("\r\n\r\n1.0E+25\r\n", $seen['body']);
    }

    public function testJsonIsWhatJsonEncodeWrites(): void
    {
        $key = $this->up->key('shapej');
        $this->up->script($key, [['status' => 200]]);
        $payload = ['url' => 'https://x/y', 'name' => 'ไทย', 'price' => 10.0, 'list' => [], 'map' => ['a' => null]];
        $this->client($key)->request('PUT', '/j', ['json' => $payload]);
        $seen = $this->up->attempts($key, 1)[0];
        // With json_encode's default flags, as Guzzle's `json` option and `Http::` send it: a
        // signature computed over json_encode($payload) matches the body.
        $this->assertSame(json_encode($payload), $seen['body']);
        $this->assertSame('{"url":"https:\/\/x\/y","name":"\u0e44\u0e17\u0e22","price":10,"list":[],"map":{"a":null}}', $seen['body']);
    }

    /** A query is encoded as Guzzle's `query` option encodes it (RFC 3986: a space as %20): what a signature over it expects. */
    public function testAQueryIsEncodedAsGuzzlesQueryOption(): void
    {
        $key = $this->up->key('shapeq');
        $this->up->script($key, [['status' => 200]]);
        $query = ['s' => 'a b', 't' => '~*+/é', 'l' => ['x y', 'z']];
        $this->client($key)->get('/q', $query);
        $this->assertSame(http_build_query($query, '', '&', PHP_QUERY_RFC3986), $this->up->attempts($key, 1)[0]['query']);
    }

    public function testDataAndTheOptionsQueryAreMergedTheOptionsWinning(): void
    {
        $key = $this->up->key('shapem');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key)->get('/m', ['a' => 1, 'b' => 2], ['query' => ['b' => 'options', 'c' => 3]]);
        $this->assertSame('a=1&b=options&c=3', $this->up->attempts($key, 1)[0]['query']);
    }

    /** `null` for a body option means "not given", as for every other option (Guzzle's `isset`). */
    public function testANullBodyOptionSendsNoBody(): void
    {
        $key = $this->up->key('shapenull');
        $this->up->script($key, [['status' => 200]]);
        $client = $this->client($key);
        foreach (['json', 'form', 'body', 'multipart'] as $option) {
            $client->request('POST', "/$option", [$option => null]);
        }
        $client->request('POST', '/both', ['json' => null, 'body' => 'raw']);
        $seen = $this->up->attempts($key, 5);
        foreach (array_slice($seen, 0, 4) as $request) {
            $this->assertSame('', $request['body'], $request['path']);
            $this->assertArrayNotHasKey('content-type', $request['headers'], $request['path']);
        }
        $this->assertSame('raw', $seen[4]['body']);
    }

    public function testAQueryKeyReplacesThatKeyInThePathsQuery(): void
    {
        $key = $this->up->key('shapep');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key)->get('/s?page=1&sort=asc', ['page' => 2]);
        $this->assertSame('sort=asc&page=2', $this->up->attempts($key, 1)[0]['query']);
    }

    public function testAJsonArgumentBesideAnotherBodyIsRefused(): void
    {
        $key = $this->up->key('shapeb');
        $client = $this->client($key);
        foreach (['json' => ['x' => 1], 'body' => 'raw', 'form' => ['x' => 1]] as $option => $value) {
            try {
                $client->post('/b', ['sku' => 1], [$option => $value]);
                $this->fail("$option beside \$json must be refused");
            } catch (\ValueError $e) {
                $this->assertStringStartsWith("option 'json': only one of 'json', 'body', 'form' and 'multipart'", $e->getMessage());
            }
        }
        $this->assertCount(0, $this->up->attempts($key, 0), 'nothing was sent');
    }

    public function testWrongTypesAreRefusedInPhpWords(): void
    {
        $client = $this->client($this->up->key('shapet'));
        $cases = [
            [['body' => ['x']], \TypeError::class, "option 'body' must be of type string, array given"],
            [['query' => 'a=1'], \TypeError::class, "option 'query' must be of type array, string given"],
            [['headers' => ['X-A' => ['ok', new \stdClass()]]], \TypeError::class, "option 'headers.X-A' must be of type string"],
            [['idempotency_key' => ''], \ValueError::class, "option 'idempotency_key': must be a non-empty string, got an empty string"],
            [['idempotency_key' => '   '], \ValueError::class, "option 'idempotency_key': must be a non-empty string, got only white space"],
            [['query' => ['o' => new \stdClass()]], \TypeError::class, "option 'query' must be of type"],
            [['jsn' => []], \ValueError::class, "option 'jsn': unknown option (known: query, json, body, form, multipart, headers, idempotency_key, timeout, connect_timeout, sink, verify, cert, ssl_key, proxy, allow_redirects, decode_content)"],
        ];
        foreach ($cases as [$options, $class, $message]) {
            try {
                $client->request('POST', '/t', $options);
                $this->fail("expected $class: $message");
            } catch (\Throwable $e) {
                $this->assertInstanceOf($class, $e, $e->getMessage());
                $this->assertStringStartsWith($message, $e->getMessage());
            }
        }
    }
}
