<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\UpstreamFailed;

/**
 * Must show 4: 400/401/403/404 (and a 500 not in retry_on) are the caller's answer after one
 * attempt; POST without an idempotency key is not retried; with a key it is, and the same
 * Idempotency-Key and body reach the upstream on every attempt.
 */
final class ClassifyTest extends HttpTestCase
{
    public function testClientErrorsAreReturnedAfterOneAttempt(): void
    {
        foreach ([400, 401, 403, 404, 422, 500] as $status) {
            $key = $this->up->key("final$status");
            $this->up->script($key, [['status' => $status, 'body' => "status $status"]]);
            $r = $this->client($key)->get('/x');
            $this->assertSame($status, $r->status());
            $this->assertFalse($r->ok());
            $this->assertSame(1, $r->attempts());
            $this->assertSame("status $status", $r->body());
            $this->assertCount(1, $this->up->attempts($key, 1), "$status must not be retried");
        }
    }

    public function testPostWithoutAKeyIsNotRetried(): void
    {
        $key = $this->up->key('postnokey');
        $this->up->script($key, [['status' => 503], ['status' => 201]]);
        try {
            $this->client($key)->post('/orders', ['sku' => 1]);
            $this->fail('expected UpstreamFailed');
        } catch (UpstreamFailed $e) {
            $this->assertSame(503, $e->getCode());
            $this->assertSame(503, $e->response()->status());
            $this->assertStringContainsString('idempotency_key', $e->getMessage());
        }
        $this->assertCount(1, $this->up->attempts($key, 1));
        // PATCH likewise.
        $key = $this->up->key('patchnokey');
        $this->up->script($key, [['status' => 429]]);
        $this->expectException(UpstreamFailed::class);
        try {
            $this->client($key)->patch('/orders/1', ['qty' => 2]);
        } finally {
            $this->assertCount(1, $this->up->attempts($key, 1));
        }
    }

    public function testABlankIdempotencyKeyHeaderIsNoKey(): void
    {
        // The option refuses a blank key; given as a header, it is sent but does not make the
        // POST retryable: a server cannot deduplicate by it.
        $key = $this->up->key('postblankkey');
        $this->up->script($key, [['status' => 503], ['status' => 201]]);
        $e = null;
        try {
            $this->client($key, ['backoff' => ['base' => 0.001, 'cap' => 0.002]])
                ->post('/orders', ['sku' => 1], ['headers' => ['Idempotency-Key' => ' ']]);
        } catch (UpstreamFailed $e) {
        }
        $this->assertInstanceOf(UpstreamFailed::class, $e);
        $this->assertSame(503, $e->getCode());
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    public function testPostWithAKeyIsRetriedWithTheSameKeyAndBody(): void
    {
        $key = $this->up->key('postkey');
        $this->up->script($key, [['status' => 503], ['status' => 503], ['status' => 201, 'json' => ['id' => 7]]]);
        $r = $this->client($key, ['backoff' => ['base' => 0.005, 'cap' => 0.02]])
            ->post('/orders', ['sku' => 1, 'price' => 1.0], ['idempotency_key' => 'order-42']);
        $this->assertSame(201, $r->status());
        $this->assertSame(3, $r->attempts());
        $attempts = $this->up->attempts($key, 3);
        $this->assertCount(3, $attempts);
        foreach ($attempts as $a) {
            $this->assertSame('POST', $a['method']);
            $this->assertSame('order-42', $a['headers']['idempotency-key']);
            $this->assertSame('{"sku":1,"price":1}', $a['body'], 'json_encode with its default flags, as Guzzle');
            $this->assertSame('application/json', $a['headers']['content-type']);
        }
    }

    public function testIdempotentMethodsAreRetriedWithoutAKey(): void
    {
        foreach (['PUT', 'DELETE', 'GET', 'HEAD', 'OPTIONS'] as $method) {
            $key = $this->up->key('idem' . $method);
            $this->up->script($key, [['status' => 503], ['status' => 200]]);
            $r = $this->client($key, ['backoff' => ['base' => 0.001, 'cap' => 0.002]])->request($method, '/x');
            $this->assertSame(2, $r->attempts(), $method);
        }
    }

    public function testQueryHeadersAndDefaultHeadersReachTheUpstream(): void
    {
        $key = $this->up->key('shape');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key, ['headers' => ['X-Api-Key' => 'k1'], 'user_agent' => 'shop/1.0'])
            ->get('/quote', ['postcode' => '10110', 'sizes' => [1, 2]], ['headers' => ['Accept' => 'application/json']]);
        $a = $this->up->attempts($key, 1)[0];
        $this->assertSame('/quote', $a['path']);
        $this->assertSame('postcode=10110&sizes%5B0%5D=1&sizes%5B1%5D=2', $a['query']);
        $this->assertSame('k1', $a['headers']['x-api-key']);
        $this->assertSame('shop/1.0', $a['headers']['user-agent']);
        $this->assertSame('application/json', $a['headers']['accept']);
    }

    public function testARawBodyIsSentByteForByte(): void
    {
        $key = $this->up->key('rawbody');
        $this->up->script($key, [['status' => 200]]);
        $bytes = "bin\x00\xff\xfe";
        $this->client($key)->request('PUT', '/blob', ['body' => $bytes, 'headers' => ['Content-Type' => 'application/octet-stream']]);
        $a = $this->up->attempts($key, 1)[0];
        $this->assertSame(strlen($bytes), $a['body_len']);
    }
}
