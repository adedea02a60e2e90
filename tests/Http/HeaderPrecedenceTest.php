<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

/**
 * One value per header, as Guzzle sends them: the client's `headers` replace the User-Agent of
 * `user_agent`; a JSON, form or multipart body's Content-Type replaces a client-wide one (a
 * multipart one with its boundary); the request's own `headers` replace both; `decode_content`
 * given as a string sets Accept-Encoding; a multipart part's own Content-Disposition replaces
 * the one the client makes.
 */
final class HeaderPrecedenceTest extends HttpTestCase
{
    private function seen(string $key): array
    {
        return $this->up->attempts($key, 1)[0]['headers'];
    }

    public function testOneValuePerHeaderAsGuzzleSendsThem(): void
    {
        $key = $this->up->key('precedence');
        $this->up->script($key, [['status' => 200]]);
        $client = $this->client($key, ['headers' => [
            'User-Agent' => 'MyApp/1.0',
            'Content-Type' => 'application/vnd.api+json',
            'Accept-Encoding' => 'br',
        ], 'decode_content' => 'gzip']);

        $client->post('/x', ['a' => 1]);
        $h = $this->seen($key);
        $this->assertSame('MyApp/1.0', $h['user-agent']);
        $this->assertSame('application/json', $h['content-type']);
        $this->assertSame('gzip', $h['accept-encoding']);

        $key2 = $this->up->key('precedence-form');
        $this->up->script($key2, [['status' => 200]]);
        $this->client($key2, ['headers' => ['Content-Type' => 'application/vnd.api+json']])
            ->request('POST', '/x', ['form' => ['a' => '1']]);
        $this->assertSame('application/x-www-form-urlencoded', $this->seen($key2)['content-type']);
    }

    public function testAMultipartBodyKeepsItsBoundaryAndAPartsOwnDisposition(): void
    {
        $key = $this->up->key('precedence-multipart');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key, ['headers' => ['Content-Type' => 'application/json']])
            ->request('POST', '/x', ['multipart' => [[
                'name' => 'doc',
                'contents' => 'PDF',
                'filename' => 'a.pdf',
                'headers' => ['Content-Type' => 'application/pdf', 'Content-Disposition' => 'form-data; name="doc"; filename="b.pdf"'],
            ]]]);
        $a = $this->up->attempts($key, 1)[0];
        $this->assertMatchesRegularExpression('~^multipart/form-data; boundary=\S+$~', $a['headers']['content-type']);
        $this->assertSame(1, substr_count(strtolower($a['body'] ?? ''), 'content-disposition'), $a['body'] ?? '(no body recorded)');
        $this->assertStringContainsString('filename="b.pdf"', $a['body'] ?? '');
    }

    public function testARequestsOwnHeadersStillWin(): void
    {
        $key = $this->up->key('precedence-request');
        $this->up->script($key, [['status' => 200]]);
        $this->client($key, ['headers' => ['User-Agent' => 'MyApp/1.0'], 'user_agent' => 'ignored/1'])
            ->post('/x', ['a' => 1], ['headers' => ['User-Agent' => 'Job/2', 'Content-Type' => 'text/plain', 'Accept-Encoding' => 'br'], 'decode_content' => 'gzip']);
        $h = $this->seen($key);
        $this->assertSame('Job/2', $h['user-agent']);
        $this->assertSame('text/plain', $h['content-type']);
        $this->assertSame('gzip', $h['accept-encoding']);
    }
}
