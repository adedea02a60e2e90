<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\TestCa;
use Resilient\Tests\Harness\Tinyproxy;
use Resilient\Tests\Harness\TlsNginx;

/**
 * Proxies: a real forward proxy (Debian's tinyproxy, started on a free loopback
 * port by tests/harness/src/Tinyproxy.php) sees the request when `proxy` is set and not when the
 * host is in `no`. Two witnesses each time: the `Via` header tinyproxy adds (recorded by the mock
 * upstream) and tinyproxy's own log of request lines. HTTPS goes through the proxy as CONNECT.
 */
final class ProxyTest extends ClientTestCase
{
    private static Tinyproxy $proxy;

    public static function setUpBeforeClass(): void
    {
        self::$proxy = Tinyproxy::shared();
    }

    /** A fresh key answering 200 (echo); returns [key, base URL]. */
    private function key(string $tag): array
    {
        $key = $this->up->key($tag);
        $this->up->script($key, [['status' => 200]]);
        return [$key, $this->up->base($key)];
    }

    private function assertThroughProxy(string $key, int $n = 1): void
    {
        $rows = $this->up->attempts($key, $n);
        $this->assertCount($n, $rows);
        foreach ($rows as $row) {
            $this->assertStringContainsString(Tinyproxy::VIA_NAME, $row['headers']['via'] ?? '(no Via header)', 'the upstream got it from the proxy');
        }
        $this->assertCount($n, self::$proxy->requestsMatching("/k/$key/"), self::$proxy->logs());
    }

    private function assertDirect(string $key): void
    {
        $rows = $this->up->attempts($key, 1);
        $this->assertCount(1, $rows);
        $this->assertArrayNotHasKey('via', $rows[0]['headers'], 'no proxy in between');
        $this->assertSame([], self::$proxy->requestsMatching("/k/$key/"));
    }

    public function testAProxyUrlCarriesEveryRequest(): void
    {
        [$key, $base] = $this->key('proxyall');
        $r = $this->client($base, ['proxy' => self::$proxy->url()])->get('/through', ['q' => 1]);
        $this->assertSame(200, $r->status());
        $this->assertThroughProxy($key);
        $this->assertSame('GET ' . $base . '/through?q=1 HTTP/1.1', self::$proxy->requestsMatching("/k/$key/")[0], 'absolute-form request line');
    }

    public function testAPerSchemeMapUsesTheProxyOfTheRequestsScheme(): void
    {
        [$key, $base] = $this->key('proxyhttp');
        $this->client($base, ['proxy' => ['http' => self::$proxy->url()]])->get('/a');
        $this->assertThroughProxy($key);

        [$key, $base] = $this->key('proxyhttpsonly');
        $this->client($base, ['proxy' => ['https' => self::$proxy->url()]])->get('/a');
        $this->assertDirect($key);
    }

    public function testAHostInNoGoesDirect(): void
    {
        [$key, $base] = $this->key('proxyno');
        $this->client($base, ['proxy' => ['http' => self::$proxy->url(), 'no' => ['127.0.0.1']]])->get('/direct');
        $this->assertDirect($key);

        // `*` in `no` exempts every host, IP addresses too (as Guzzle and curl read it).
        [$key, $base] = $this->key('proxynostar');
        $this->client($base, ['proxy' => ['http' => self::$proxy->url(), 'no' => ['*']]])->get('/direct');
        $this->assertDirect($key);

        // Another host in `no` does not exempt this one.
        [$key, $base] = $this->key('proxynoother');
        $this->client($base, ['proxy' => ['http' => self::$proxy->url(), 'no' => ['.internal.example', 'example.com']]])->get('/through');
        $this->assertThroughProxy($key);
    }

    public function testNoMatchesAHostNameAndHttpsHostsToo(): void
    {
        // `localhost` in `no`, the request to localhost: direct.
        [$key] = $this->key('proxynolocal');
        $base = "http://localhost:{$this->up->port}/k/$key";
        $this->client($base, ['proxy' => ['http' => self::$proxy->url(), 'no' => ['localhost']]])->get('/direct');
        $this->assertDirect($key);

        // An HTTPS host in `no`: no CONNECT.
        $nginx = TlsNginx::shared();
        $hostPort = '127.0.0.1:' . $nginx->ports['ok'];
        $before = count(self::$proxy->requestsMatching("CONNECT $hostPort "));
        $r = $this->client($nginx->url('ok'), [
            'verify' => TestCa::shared()->path('ca.pem'),
            'proxy' => ['https' => self::$proxy->url(), 'no' => ['127.0.0.1']],
        ])->get('/hello');
        $this->assertSame(200, $r->status());
        $this->assertCount($before, self::$proxy->requestsMatching("CONNECT $hostPort "));
    }

    public function testTheEnvironmentsProxyIsHonouredWithoutTheOption(): void
    {
        // A fresh PHP process: the environment is read where the process's clients are made.
        $getIn = function (string $base, string $noProxy): void {
            $code = 'echo (new Resilient\\Client("env", ["base_url" => ' . var_export($base, true) . ']))->get("/env")->status();';
            $proxy = self::$proxy->url();
            $r = PhpProcess::code($code, [], ['HTTP_PROXY' => $proxy, 'http_proxy' => $proxy, 'NO_PROXY' => $noProxy, 'no_proxy' => $noProxy])->wait(20.0);
            $this->assertSame('200', $r->stdout, $r->describe());
        };
        [$key, $base] = $this->key('proxyenv');
        $getIn($base, '');
        $this->assertThroughProxy($key);

        [$key, $base] = $this->key('proxyenvno');
        $getIn($base, '127.0.0.1');
        $this->assertDirect($key);

        [$key, $base] = $this->key('proxyenvnostar');
        $getIn($base, '*');
        $this->assertDirect($key);
    }

    /**
     * A proxy that is down refuses the connect as an upstream would: the message says a proxy
     * carries the request, or the reader looks for a fault in an upstream that is up.
     */
    public function testAConnectErrorSaysAProxyCarriesTheRequest(): void
    {
        [$key, $base] = $this->key('proxydead');
        $dead = 'http://127.0.0.1:9';
        try {
            $this->client($base, ['proxy' => $dead, 'max_attempts' => 1])->get('/x');
            $this->fail('the proxy is down');
        } catch (\Resilient\UpstreamFailed $e) {
            $this->assertSame('connect', $e->failure());
            $this->assertStringContainsString("a proxy is set for http:// URLs (option 'proxy' or the environment's *_PROXY): the failure may be the proxy's", $e->getMessage());
        }
        $this->assertSame([], $this->up->attempts($key, 0));
        // No proxy for the request's scheme, or one its `no` list exempts it from: none named.
        foreach ([[], ['proxy' => ['https' => $dead]], ['proxy' => ['http' => $dead, 'no' => ['*']]]] as $options) {
            try {
                $this->client($dead, ['max_attempts' => 1] + $options)->get('/x');
                $this->fail('nothing listens there');
            } catch (\Resilient\UpstreamFailed $e) {
                $this->assertStringNotContainsString('proxy', $e->getMessage(), json_encode($options));
            }
        }
        // The environment's, as reqwest reads it: the scheme's variable, not the other one's.
        $inChild = function (array $env): string {
            $code = 'try { (new Resilient\\Client("envdead", ["base_url" => "http://127.0.0.1:9", "max_attempts" => 1]))->get("/x"); }'
                . ' catch (Resilient\\UpstreamFailed $e) { echo $e->getMessage(); }';
            $r = PhpProcess::code($code, [], $env + ['NO_PROXY' => '', 'no_proxy' => ''])->wait(20.0);
            $this->assertSame(0, $r->exitCode, $r->describe());

            return $r->stdout;
        };
        $this->assertStringContainsString('a proxy is set for http:// URLs', $inChild(['HTTP_PROXY' => 'http://127.0.0.1:9', 'http_proxy' => 'http://127.0.0.1:9']));
        $this->assertStringNotContainsString('proxy', $inChild(['HTTPS_PROXY' => 'http://127.0.0.1:9', 'https_proxy' => 'http://127.0.0.1:9']));
    }

    public function testProxyIsAlsoAPerRequestOption(): void
    {
        [$key, $base] = $this->key('proxyreq');
        $client = $this->client($base);
        $client->get('/direct');
        $client->get('/through', null, ['proxy' => self::$proxy->url()]);
        $rows = $this->up->attempts($key, 2);
        $this->assertArrayNotHasKey('via', $rows[0]['headers']);
        $this->assertStringContainsString(Tinyproxy::VIA_NAME, $rows[1]['headers']['via'] ?? '');
        $this->assertCount(1, self::$proxy->requestsMatching("/k/$key/"));
    }

    public function testHttpsGoesThroughTheProxyAsConnect(): void
    {
        $nginx = TlsNginx::shared();
        $hostPort = '127.0.0.1:' . $nginx->ports['ok'];
        $before = count(self::$proxy->requestsMatching("CONNECT $hostPort "));
        $r = $this->client($nginx->url('ok'), [
            'verify' => TestCa::shared()->path('ca.pem'),
            'proxy' => ['https' => self::$proxy->url()],
        ])->get('/hello');
        $this->assertSame(200, $r->status());
        $this->assertCount($before + 1, self::$proxy->requestsMatching("CONNECT $hostPort "), self::$proxy->logs());
    }

    public function testRetriesGoThroughTheProxyToo(): void
    {
        $key = $this->up->key('proxyretry');
        $this->up->script($key, [['status' => 503], ['status' => 200]]);
        $r = $this->client($this->up->base($key), ['proxy' => self::$proxy->url()])->get('/again');
        $this->assertSame(2, $r->attempts());
        $this->assertThroughProxy($key, 2);
    }
}
