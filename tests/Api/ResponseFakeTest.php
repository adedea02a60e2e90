<?php

declare(strict_types=1);

namespace Resilient\Tests\Api;

use Resilient\Response;
use Resilient\Tests\Harness\TestCase;

/** `Response::fake()`: a response built in PHP, for tests of code that uses a client. */
final class ResponseFakeTest extends TestCase
{
    public function testAFakeReadsLikeAResponse(): void
    {
        $r = Response::fake(201, "{\"id\":7}", ['X-Request-Id' => 'r1', 'Set-Cookie' => ['a=1', 'b=2']]);
        $this->assertSame(201, $r->status());
        $this->assertTrue($r->ok());
        $this->assertSame(['id' => 7], $r->json());
        $this->assertSame('a=1, b=2', $r->header('set-cookie'));
        $this->assertSame(['x-request-id' => ['r1'], 'set-cookie' => ['a=1', 'b=2']], $r->headers());
        $this->assertSame(0, $r->attempts());
        $this->assertSame(0.0, $r->elapsedMs());

        $empty = Response::fake();
        $this->assertSame([200, '', false], [$empty->status(), $empty->body(), $empty->header('x') !== null]);
        $this->assertSame("\x00\xff", Response::fake(500, "\x00\xff")->body());
    }

    /** `json($key, $default)` as Laravel's Response reads it: a dot path, else the default. */
    public function testJsonTakesADotPathAndADefaultAsLaravelsResponse(): void
    {
        $r = Response::fake(200, '{"data":{"items":[{"id":7,"tags":null}],"0":"zero","a.b":1},"n":0}');
        $this->assertSame(7, $r->json('data.items.0.id'));
        $this->assertSame([['id' => 7, 'tags' => null]], $r->json('data.items'));
        $this->assertSame('zero', $r->json('data.0'), 'a numeric segment finds the int key PHP made');
        $this->assertNull($r->json('data.items.0.tags', 'given'), 'a null that is there is not the default');
        $this->assertSame(0, $r->json('n', 5));
        $this->assertSame('none', $r->json('data.items.1.id', 'none'));
        $this->assertSame('none', $r->json('n.deeper', 'none'), 'into a scalar: not there');
        $this->assertSame('none', $r->json('data.a.b', 'none'), 'a dot always separates, as in Laravel');
        $this->assertNull($r->json('missing'));
        $this->assertSame('computed', $r->json('missing', fn () => 'computed'), 'a Closure default is called, as value() does');
        $this->assertSame(7, $r->json('data.items.0.id', fn () => $this->fail('called for a path that is there')));
        $this->assertSame('strlen', $r->json('missing', 'strlen'), 'a callable string is a value');
        try {
            $r->json('missing', fn () => throw new \LogicException('from the default'));
            $this->fail('the default\'s exception was lost');
        } catch (\LogicException $e) {
            $this->assertSame('from the default', $e->getMessage());
        }
        $this->assertSame($r->json(), $r->json(null));
        $this->assertSame('d', Response::fake(200, 'not json')->json('a', 'd'));
        $this->assertSame([1], Response::fake(200, '{"5":[1]}')->json(5), 'an int key');
        $this->expectException(\TypeError::class);
        $this->expectExceptionMessage('Resilient\Response::json(): Argument #1 ($key) must be of type string, array given');
        $r->json([]);
    }

    public function testBadArgumentsAreRefusedByName(): void
    {
        foreach ([[99], [600], [-1]] as $args) {
            try {
                Response::fake(...$args);
                $this->fail('status ' . $args[0] . ' must be refused');
            } catch (\ValueError $e) {
                $this->assertStringContainsString("argument 'status' must be an HTTP status 100..599", $e->getMessage());
            }
        }
        // Headers a real response could not carry (code under test may copy them on).
        foreach ([
            'header name "X\\r…" is not a valid header name' => ["X\r\nY" => 'v'],
            'header name "" is not a valid header name' => ['' => 'v'],
            'header name "a\\0" is not a valid header name' => ["a\0" => 'v'],
            'header "X-A" has a value with a line break or another control character' => ['X-A' => ['ok', "a\r\nInjected: 1"]],
        ] as $expected => $headers) {
            try {
                Response::fake(200, '', $headers);
                $this->fail("accepted: $expected");
            } catch (\ValueError $e) {
                $this->assertSame("Resilient\\Response::fake(): $expected", $e->getMessage());
            }
        }
        // A header value of a type no response carries is named as this function's.
        foreach ([[new \stdClass(), 'stdClass'], [[['nested']], 'array']] as [$value, $given]) {
            try {
                Response::fake(200, '', ['X-A' => $value]);
                $this->fail("accepted a header value of type $given");
            } catch (\TypeError $e) {
                $this->assertSame(
                    "Resilient\\Response::fake(): header \"X-A\" must be of type string, $given given",
                    $e->getMessage(),
                );
            }
        }
        $this->expectException(\TypeError::class);
        $this->expectExceptionMessage('($body) must be of type string, array given');
        Response::fake(200, []);
    }
}
