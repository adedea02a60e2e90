<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Http\MockUpstream;
use Resilient\UpstreamFailed;

/**
 * Redirects, with the mock upstream scripting 3xx answers and `Location` headers:
 * redirects are off by default (the 3xx is the answer); `allow_redirects => true` and
 * `['max' => 5]` follow them inside ONE attempt; a loop fails after 5 follows ("too many
 * redirects", not retried); Authorization and Cookie are not sent to another host (a second
 * upstream on another port, reached as `localhost`, records what it got) but stay on the same host.
 */
final class RedirectTest extends ClientTestCase
{
    private static ?MockUpstream $other = null;

    public static function tearDownAfterClass(): void
    {
        self::$other?->stop();
        self::$other = null;
    }

    private static function other(): MockUpstream
    {
        return self::$other ??= new MockUpstream();
    }

    /** Scripts $key: each path in $hops answers 302 to the next, the last path answers 200 "landed". */
    private function chain(string $key, array $hops, int $status = 302): void
    {
        for ($i = 0; $i < count($hops) - 1; $i++) {
            $this->up->script($key, [['status' => $status, 'headers' => ['Location' => "/k/$key" . $hops[$i + 1]], 'body' => 'moved']], 'repeat_last', $hops[$i]);
        }
        $this->up->script($key, [['status' => 200, 'body' => 'landed']], 'repeat_last', end($hops));
    }

    /** @return list<string> the paths the key received, in order */
    private function paths(string $key, int $min): array
    {
        return array_column($this->up->attempts($key, $min), 'path');
    }

    public function testRedirectsAreOffByDefault(): void
    {
        $key = $this->up->key('redir-off');
        $this->chain($key, ['/start', '/final']);
        $r = $this->client($this->up->base($key))->get('/start');
        $this->assertSame(302, $r->status());
        $this->assertSame("/k/$key/final", $r->header('Location'));
        $this->assertSame('moved', $r->body());
        $this->assertSame(1, $r->attempts());
        $this->assertSame(['/start'], $this->paths($key, 1));

        $r = $this->client($this->up->base($key), ['allow_redirects' => false])->get('/start');
        $this->assertSame(302, $r->status(), 'allow_redirects => false is the default spelled out');
    }

    public function testAllowRedirectsTrueFollowsWithinOneAttempt(): void
    {
        $key = $this->up->key('redir-on');
        $this->chain($key, ['/start', '/middle', '/final']);
        $r = $this->client($this->up->base($key), ['allow_redirects' => true])->get('/start');
        $this->assertSame(200, $r->status());
        $this->assertSame('landed', $r->body());
        $this->assertSame(1, $r->attempts(), 'redirects are part of the same attempt');
        $this->assertCount(1, $this->attemptLog);
        $this->assertSame(['/start', '/middle', '/final'], $this->paths($key, 3));
        $this->assertSame($this->up->base($key) . '/final', $r->url(), 'the answer comes from where the redirects led');
        $this->assertTrue($r->redirected());
    }

    public function testUrlIsTheRequestsOwnWithoutRedirectsAndNeverShowsUserInfo(): void
    {
        $key = $this->up->key('redir-url');
        $this->chain($key, ['/start', '/final']);
        $base = $this->up->base($key);
        $r = $this->client($base)->get('/start', ['page' => 2]);
        $this->assertSame(302, $r->status());
        $this->assertSame("$base/start?page=2", $r->url());
        $this->assertFalse($r->redirected());

        $withUser = str_replace('http://', 'http://user:secret@', $base);
        $r = $this->client($withUser, ['allow_redirects' => true])->get('/start#top');
        $this->assertSame(200, $r->status());
        $this->assertSame("$base/final", $r->url(), 'no user-info, no fragment');
        $this->assertNull(\Resilient\Response::fake(200)->url(), 'a fake answered no request');
        $this->assertFalse(\Resilient\Response::fake(200)->redirected());
    }

    public function testEveryRedirectStatusAndAnAbsoluteLocationAreFollowed(): void
    {
        foreach ([301, 302, 303, 307, 308] as $status) {
            $key = $this->up->key("redir$status");
            $this->up->script($key, [['status' => $status, 'headers' => ['Location' => $this->up->base($key) . '/final']]], 'repeat_last', '/start');
            $this->up->script($key, [['status' => 200, 'body' => 'landed']], 'repeat_last', '/final');
            $r = $this->client($this->up->base($key), ['allow_redirects' => true])->get('/start');
            $this->assertSame(200, $r->status(), "$status");
            $this->assertSame(['/start', '/final'], $this->paths($key, 2), "$status");
        }
    }

    public function testMaxFiveFollowsAChainOfFive(): void
    {
        $key = $this->up->key('redir-five');
        $hops = ['/r0', '/r1', '/r2', '/r3', '/r4', '/final'];
        $this->chain($key, $hops);
        $r = $this->client($this->up->base($key), ['allow_redirects' => ['max' => 5]])->get('/r0');
        $this->assertSame(200, $r->status());
        $this->assertSame(1, $r->attempts());
        $this->assertSame($hops, $this->paths($key, 6));
    }

    public function testALoopFailsAfterFiveFollowsAndIsNotRetried(): void
    {
        $key = $this->up->key('redir-loop');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "/k/$key/loop"]]], 'repeat_last', '/loop');
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['allow_redirects' => true])->get('/loop'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame(0, $e->getCode());
        $this->assertStringContainsString('too many redirects', $e->getMessage());
        $this->assertCount(1, $this->attemptLog, 'not retried: ' . json_encode($this->attemptLog));
        $this->assertSame(array_fill(0, 6, '/loop'), $this->paths($key, 6), 'the request and 5 follows, no sixth follow');
    }

    public function testASmallerMaxStopsEarlier(): void
    {
        $key = $this->up->key('redir-max2');
        $this->chain($key, ['/r0', '/r1', '/r2', '/final']);
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['allow_redirects' => ['max' => 2]])->get('/r0'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertStringContainsString('too many redirects', $e->getMessage());
        $this->assertSame(['/r0', '/r1', '/r2'], $this->paths($key, 3));
        $this->assertCount(1, $this->attemptLog);
    }

    public function testAuthorizationAndCookieAreNotSentToAnotherHost(): void
    {
        $other = self::other();
        $key = $this->up->key('redir-cross');
        $otherKey = $other->key('landing');
        $other->script($otherKey, [['status' => 200, 'body' => 'other host']]);
        // 127.0.0.1:P1 → localhost:P2: another host (and port), as Guzzle and browsers count it.
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "http://localhost:{$other->port}/k/$otherKey/landing"]]]);
        $r = $this->client($this->up->base($key), [
            'allow_redirects' => true,
            'headers' => ['Authorization' => 'Bearer secret-token-1', 'Cookie' => 'session=abc', 'X-Trace' => 'keep-me'],
        ])->get('/start');
        $this->assertSame(200, $r->status());
        $this->assertSame('other host', $r->body());

        $first = $this->up->attempts($key, 1)[0]['headers'];
        $this->assertSame('Bearer secret-token-1', $first['authorization']);
        $this->assertSame('session=abc', $first['cookie']);
        $landed = $other->attempts($otherKey, 1);
        $this->assertCount(1, $landed);
        $this->assertArrayNotHasKey('authorization', $landed[0]['headers'], 'Authorization must not follow to another host');
        $this->assertArrayNotHasKey('cookie', $landed[0]['headers'], 'Cookie must not follow to another host');
        $this->assertSame('keep-me', $landed[0]['headers']['x-trace'] ?? null, 'other headers do follow');
        $this->assertStringStartsWith('localhost:', $landed[0]['headers']['host']);
    }

    public function testAuthorizationIsNotSentToAnotherPortOfTheSameHost(): void
    {
        // Same host name, another port: another origin (Guzzle strips here too since 7.4.5).
        $other = self::other();
        $key = $this->up->key('redir-port');
        $otherKey = $other->key('port');
        $other->script($otherKey, [['status' => 200]]);
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => $other->base($otherKey) . '/landing']]]);
        $this->client($this->up->base($key), ['allow_redirects' => true, 'headers' => ['Authorization' => 'Bearer port-token']])->get('/start');
        $landed = $other->attempts($otherKey, 1);
        $this->assertCount(1, $landed);
        $this->assertStringStartsWith('127.0.0.1:', $landed[0]['headers']['host']);
        $this->assertArrayNotHasKey('authorization', $landed[0]['headers']);
    }

    public function testAuthorizationStaysOnTheSameHost(): void
    {
        $key = $this->up->key('redir-same');
        $this->chain($key, ['/start', '/final']);
        $this->client($this->up->base($key), ['allow_redirects' => true])
            ->get('/start', null, ['headers' => ['Authorization' => 'Bearer same-host']]);
        $rows = $this->up->attempts($key, 2);
        $this->assertSame(['/start', '/final'], array_column($rows, 'path'));
        $this->assertSame('Bearer same-host', $rows[1]['headers']['authorization'] ?? null);
    }

    /**
     * Guzzle's rule, which `Http::` follows: after a 301, 302 or 303 every method but GET,
     * HEAD and OPTIONS continues as GET without its body. A PUT or DELETE is not sent again,
     * body and all, where a move points.
     */
    public function testAMoveOrSeeOtherContinuesAsGetUnlessTheMethodIsSafe(): void
    {
        foreach (['POST' => [301, 302, 303], 'PUT' => [301, 302], 'PATCH' => [303], 'DELETE' => [301, 302]] as $method => $statuses) {
            foreach ($statuses as $status) {
                $key = $this->up->key('redir-' . strtolower($method) . $status);
                $this->chain($key, ['/submit', '/done'], $status);
                $r = $this->client($this->up->base($key), ['allow_redirects' => true])->request($method, '/submit', ['json' => ['a' => 1]]);
                $this->assertSame(200, $r->status());
                $rows = $this->up->attempts($key, 2);
                $this->assertSame([$method, 'GET'], array_column($rows, 'method'), "$method $status");
                $this->assertSame(0, $rows[1]['body_len'], "$method $status: the body is not sent again");
            }
        }
        $key = $this->up->key('redir-options303');
        $this->chain($key, ['/submit', '/done'], 303);
        $this->client($this->up->base($key), ['allow_redirects' => true])->request('OPTIONS', '/submit');
        $this->assertSame(['OPTIONS', 'OPTIONS'], array_column($this->up->attempts($key, 2), 'method'));
    }

    public function testRedirectsHappenInsideTheAttemptAndItsTimeout(): void
    {
        $key = $this->up->key('redir-timeout');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "/k/$key/slow"]]], 'repeat_last', '/start');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 5000]], 'repeat_last', '/slow');
        $t = microtime(true);
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['allow_redirects' => true, 'timeout' => 0.4, 'max_attempts' => 2])->get('/start'));
        $elapsed = microtime(true) - $t;
        $this->assertInstanceOf(\Resilient\Unavailable::class, $e, self::describe($e));
        $this->assertLessThan(2.5, $elapsed, 'two attempts of 0.4 s, each covering its redirect');
        $this->assertCount(2, $this->attemptLog);
        $this->assertSame(['/start', '/slow', '/start', '/slow'], array_column($this->up->attempts($key, 4, 5000, false), 'path'), 'every attempt starts over at the original URL');
    }

    public function testARedirectToAProtocolNotAllowedFailsOnce(): void
    {
        $key = $this->up->key('redir-proto');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => $this->up->base($key) . '/final']]], 'repeat_last', '/start');
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['allow_redirects' => ['protocols' => ['https']]])->get('/start'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame(0, $e->getCode());
        $this->assertStringContainsString('http', $e->getMessage());
        $this->assertCount(1, $this->attemptLog);
        $this->assertSame(['/start'], $this->paths($key, 1));
    }

    /** A `Location` longer than any URL may be (65,534 bytes) is the upstream's failure, not a crash. */
    public function testALocationTooLongForAUrlIsTheUpstreamsFailure(): void
    {
        $key = $this->up->key('redir-long');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "/k/$key/" . str_repeat('a', 70000)]]], 'repeat_last', '/start');
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['allow_redirects' => true])->get('/start'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame(0, $e->getCode());
        $this->assertStringNotContainsString(str_repeat('a', 100), $e->getMessage(), 'the URL is not repeated in full');
    }

    public function testRefererIsSentWhenAsked(): void
    {
        $key = $this->up->key('redir-referer');
        $this->chain($key, ['/start', '/final']);
        $this->client($this->up->base($key), ['allow_redirects' => ['referer' => true]])->get('/start');
        $rows = $this->up->attempts($key, 2);
        $this->assertSame($this->up->base($key) . '/start', $rows[1]['headers']['referer'] ?? null);

        $key = $this->up->key('redir-noreferer');
        $this->chain($key, ['/start', '/final']);
        $this->client($this->up->base($key), ['allow_redirects' => true])->get('/start');
        $this->assertArrayNotHasKey('referer', $this->up->attempts($key, 2)[1]['headers'], 'referer is off by default');
    }

    public function testStrictAnd307KeepTheMethodAndBody(): void
    {
        foreach ([[302, ['strict' => true]], [307, true], [308, true]] as [$status, $redirects]) {
            $key = $this->up->key("redir-keep$status");
            $this->chain($key, ['/submit', '/done'], $status);
            $r = $this->client($this->up->base($key), ['allow_redirects' => $redirects])->post('/submit', ['a' => 1]);
            $this->assertSame(200, $r->status());
            $rows = $this->up->attempts($key, 2);
            $this->assertSame(['POST', 'POST'], array_column($rows, 'method'), "$status");
            $this->assertSame('{"a":1}', $rows[1]['body'], "$status: the body is sent again");
        }
    }

    public function testOnlyTheFinalBodyGoesToASink(): void
    {
        $key = $this->up->key('redir-sink');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => "/k/$key/file"], 'body' => 'the redirect body']], 'repeat_last', '/start');
        $this->up->script($key, [['stream' => ['bytes' => 1000]]], 'repeat_last', '/file');
        $path = sys_get_temp_dir() . '/' . $key . '.bin';
        try {
            $r = $this->client($this->up->base($key), ['allow_redirects' => true])->get('/start', null, ['sink' => $path]);
            $this->assertSame(200, $r->status());
            $this->assertSame(str_repeat('x', 1000), file_get_contents($path));
        } finally {
            @unlink($path);
        }
    }

    /**
     * A redirect whose target gives no answer: the call gets none, so the sink stays as it was
     * (the redirect's own body had already truncated it and taken its place).
     */
    public function testARedirectToNowhereLeavesTheSinkAsItWas(): void
    {
        $key = $this->up->key('redir-sink-nowhere');
        $this->up->script($key, [['status' => 302, 'headers' => ['Location' => 'http://127.0.0.1:' . Run::freePort() . '/gone'], 'body' => 'the redirect body']], 'repeat_last', '/start');
        $path = sys_get_temp_dir() . '/' . $key . '.bin';
        file_put_contents($path, 'yesterday');
        try {
            try {
                $this->client($this->up->base($key), ['allow_redirects' => true, 'max_attempts' => 1])->get('/start', null, ['sink' => $path]);
                $this->fail('the redirect leads nowhere');
            } catch (UpstreamFailed $e) {
                $this->assertSame('connect', $e->failure());
            }
            $this->assertSame('yesterday', file_get_contents($path));
        } finally {
            @unlink($path);
        }
    }

    public function testAllowRedirectsIsAlsoAPerRequestOption(): void
    {
        $key = $this->up->key('redir-req');
        $this->chain($key, ['/start', '/final']);
        $client = $this->client($this->up->base($key));
        $this->assertSame(200, $client->get('/start', null, ['allow_redirects' => true])->status());
        $this->assertSame(302, $client->get('/start')->status());
        $on = $this->client($this->up->base($key), ['allow_redirects' => true]);
        $this->assertSame(302, $on->request('GET', '/start', ['allow_redirects' => false])->status());
    }
}
