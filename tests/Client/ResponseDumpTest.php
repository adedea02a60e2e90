<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

/**
 * `var_dump()`, `print_r()` and Laravel's `dump()` of a `Resilient\Response` show what a reader
 * debugging a call needs (the status, the URL without its query, attempts, time, the headers'
 * names, the body's length) and no secret: an answer's `Set-Cookie`, its body, a token in the
 * request's query. Dumps end up in logs.
 */
final class ResponseDumpTest extends ClientTestCase
{
    public function testADumpShowsTheAnswerWithoutItsSecrets(): void
    {
        $key = $this->up->key('dump');
        $this->up->script($key, [['status' => 201, 'headers' => ['Set-Cookie' => 'sid=c00k1eS3cr3t', 'X-Request-Id' => 'r-1'], 'body' => '{"token":"b0dyS3cr3t"}']]);
        $r = $this->client($this->up->base($key))->get('/me', ['access_token' => 'qu3ryS3cr3t']);

        ob_start();
        var_dump($r);
        $dumped = ob_get_clean() . print_r($r, true);
        foreach (['c00k1eS3cr3t', 'b0dyS3cr3t', 'qu3ryS3cr3t', 'r-1'] as $secret) {
            $this->assertStringNotContainsString($secret, $dumped);
        }
        $info = $r->__debugInfo();
        $this->assertSame([201, $this->up->base($key) . '/me', 1, 22], [$info['status'], $info['url'], $info['attempts'], $info['bodyBytes']]);
        $this->assertContains('set-cookie', $info['headers']);
        $this->assertContains('x-request-id', $info['headers']);
        $this->assertGreaterThan(0.0, $info['elapsedMs']);
        $this->assertStringContainsString('["status"]=>' . "\n  int(201)", $dumped, 'var_dump shows it');
        $this->assertStringContainsString('[bodyBytes] => 22', $dumped, 'print_r shows it');
    }
}
