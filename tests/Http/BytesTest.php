<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

/**
 * No silent rewriting. Non-UTF-8 bytes in header, query and form values (and
 * array keys) used to become U+FFFD; now they are refused with a \ValueError
 * naming the option, and nothing is sent. A raw `body` reaches the upstream byte for byte.
 * A response with 150 headers (hyper's default limit is 100) is read whole.
 */
final class BytesTest extends HttpTestCase
{
    public function testNonUtf8OptionValuesAreRefusedAndNothingIsSent(): void
    {
        $key = $this->up->key('bytes');
        $client = $this->client($key);
        $latin1 = "caf\xE9";
        $cases = [
            'headers.X-Name' => fn () => $client->get('/h', [], ['headers' => ['X-Name' => $latin1]]),
            'query.q' => fn () => $client->get('/q', ['q' => $latin1]),
            'query.q (request)' => fn () => $client->request('GET', '/q', ['query' => ['q' => $latin1]]),
            'form.name' => fn () => $client->request('POST', '/f', ['form' => ['name' => $latin1]]),
            'query (key)' => fn () => $client->get('/k', ["k\xFF" => '1']),
        ];
        foreach ($cases as $label => $call) {
            try {
                $call();
                $this->fail("$label: expected a refusal");
            } catch (\ValueError $e) {
                $option = explode(' ', $label)[0];
                $this->assertStringStartsWith("option '$option", $e->getMessage(), $label);
                $this->assertStringContainsString('is not valid UTF-8', $e->getMessage(), $label);
                $this->assertStringNotContainsString($latin1, $e->getMessage(), 'the value is not echoed');
            }
        }
        try {
            new \Resilient\Client('bytes', ['base_url' => $this->up->base($key), 'headers' => ['X-Default' => "\xC3\x28"]]);
            $this->fail('expected a refusal of a default header');
        } catch (\ValueError $e) {
            $this->assertStringStartsWith("option 'headers.X-Default': is not valid UTF-8", $e->getMessage());
        }
        $this->assertCount(0, $this->up->attempts($key, 0), 'nothing was sent');
    }

    public function testUtf8ValuesAndARawBodyArriveByteForByte(): void
    {
        $key = $this->up->key('bytesok');
        $client = $this->client($key);
        $binary = "\x00\xFF\xFE caf\xE9 \x80";
        $r = $client->request('POST', '/b', [
            'body' => $binary,
            'query' => ['q' => 'café ☕'],
            'headers' => ['X-Name' => 'café', 'Content-Type' => 'application/octet-stream'],
        ]);
        $this->assertSame(200, $r->status());
        $seen = $this->up->attempts($key, 1)[0];
        $this->assertSame(bin2hex($binary), $seen['body_hex']);
        $this->assertSame('q=' . rawurlencode('café ☕'), $seen['query']);
        $this->assertSame('café', $seen['headers']['x-name']);
    }

    public function testAResponseWith150HeadersIsReadWhole(): void
    {
        $key = $this->up->key('manyheaders');
        $headers = [];
        for ($i = 0; $i < 150; $i++) {
            $headers["X-H-$i"] = "v$i";
        }
        $this->up->script($key, [['status' => 200, 'headers' => $headers, 'body' => 'ok']]);
        $r = $this->client($key)->get('/many');
        $this->assertSame('ok', $r->body());
        $this->assertSame('v149', $r->header('X-H-149'));
        $this->assertGreaterThanOrEqual(150, count($r->headers()));
    }
}
