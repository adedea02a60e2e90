<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Tests\Harness\TestCa;
use Resilient\Tests\Harness\TlsNginx;
use Resilient\UpstreamFailed;

/**
 * TLS and mTLS: real nginx with certificates from a test CA made by openssl
 * (tests/harness/src/TestCa.php). `verify => ca.pem` succeeds; the default verification (system
 * roots) refuses the unknown CA; `verify => false` succeeds; a wrong host name and an expired
 * certificate are refused with the cause named; a client certificate required by nginx
 * (`ssl_verify_client on`) works with `cert` / `ssl_key` (also an encrypted PKCS#8 key with its
 * password) and is missed without. Every TLS refusal is an UpstreamFailed with code 0 after ONE
 * attempt although the client allows 3: the client's on_attempt count and nginx's count of
 * failed handshakes agree.
 */
final class TlsTest extends ClientTestCase
{
    private static TlsNginx $nginx;
    private static TestCa $ca;

    public static function setUpBeforeClass(): void
    {
        self::$ca = TestCa::shared();
        self::$nginx = TlsNginx::shared();
    }

    private function ca(string $file = 'ca.pem'): string
    {
        return self::$ca->path($file);
    }

    public function testVerifyWithTheTestCaSucceedsOnIpAndHostName(): void
    {
        $before = count(self::$nginx->requests('ok'));
        foreach (['127.0.0.1', 'localhost'] as $host) {
            $r = $this->client(self::$nginx->url('ok', $host), ['verify' => $this->ca()])->get('/hello');
            $this->assertSame(200, $r->status(), $host);
            $this->assertSame('hello from ' . self::$nginx->ports['ok'] . "\n", $r->body());
            $this->assertSame(1, $r->attempts());
        }
        $seen = array_slice(self::$nginx->waitForRequests('ok', $before + 2), $before);
        $this->assertCount(2, $seen);
        $this->assertSame('TLSv1.3', $seen[0]['tls']);
        $this->assertSame('HTTP/2.0', $seen[0]['protocol'], 'HTTPS offers HTTP/2 by ALPN and nginx takes it');
    }

    /** @return array<string, array{string, array<string,mixed>, string}> listener, options, the cause the message names */
    public static function refusals(): array
    {
        return [
            'unknown CA, default verification' => ['ok', [], '/unknown ?issuer|unknown ca|not trusted|self[- ]signed/i'],
            'unknown CA, verify true' => ['ok', ['verify' => true], '/unknown ?issuer|unknown ca|not trusted|self[- ]signed/i'],
            'wrong host name' => ['wrongHost', ['verify' => 'CA'], '/name|host/i'],
            'expired' => ['expired', ['verify' => 'CA'], '/expired/i'],
        ];
    }

    /** @dataProvider refusals */
    public function testACertificateProblemIsRefusedOnceWithTheCauseNamed(string $listener, array $options, string $cause): void
    {
        if (($options['verify'] ?? null) === 'CA') {
            $options['verify'] = $this->ca();
        }
        $before = count(self::$nginx->failedHandshakes($listener));
        $requestsBefore = count(self::$nginx->requests($listener));
        $e = self::thrown(fn () => $this->client(self::$nginx->url($listener), $options)->get('/hello'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame(0, $e->getCode(), self::describe($e));
        $this->assertStringContainsString('certificate', strtolower($e->getMessage()));
        $this->assertMatchesRegularExpression($cause, $e->getMessage(), 'the message names the cause');
        $this->assertNull($e->response());
        $this->assertCount(1, $this->attemptLog, 'a certificate does not fix itself: no retry (' . json_encode($this->attemptLog) . ')');
        $this->assertFalse($this->attemptLog[0]['retry_follows']);
        // nginx saw the client give up in the handshake (rustls sends an alert), exactly once.
        $this->waitFor(fn () => count(self::$nginx->failedHandshakes($listener)) > $before, 5.0, "nginx's log of the failed handshake");
        $this->assertCount($before + 1, self::$nginx->failedHandshakes($listener), self::$nginx->logs());
        $this->assertCount($requestsBefore, self::$nginx->requests($listener), 'no request got through');
    }

    public function testVerifyFalseAcceptsEveryCertificate(): void
    {
        foreach (['ok', 'wrongHost', 'expired'] as $listener) {
            $r = $this->client(self::$nginx->url($listener), ['verify' => false])->get('/hello');
            $this->assertSame(200, $r->status(), $listener);
            $this->assertSame('hello from ' . self::$nginx->ports[$listener] . "\n", $r->body());
        }
    }

    public function testVerifyIsAlsoAPerRequestOption(): void
    {
        $client = $this->client(self::$nginx->url('ok'));
        $this->assertSame(200, $client->get('/hello', null, ['verify' => $this->ca()])->status());
        $this->assertSame(200, $client->request('GET', '/hello', ['verify' => false])->status());
        $e = self::thrown(fn () => $client->get('/hello'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, 'the client default (system roots) still applies to other requests');
    }

    public function testACaBundleWithSeveralCertificatesIsAccepted(): void
    {
        $bundle = self::$ca->dir . '/bundle.pem';
        file_put_contents($bundle, file_get_contents($this->ca('stranger-ca.pem')) . file_get_contents($this->ca()));
        $this->assertSame(200, $this->client(self::$nginx->url('ok'), ['verify' => $bundle])->get('/hello')->status());
        // A bundle without the server's CA refuses it, although it is a valid bundle.
        $e = self::thrown(fn () => $this->client(self::$nginx->url('ok'), ['verify' => $this->ca('client-ca.pem')])->get('/hello'));
        $this->assertInstanceOf(UpstreamFailed::class, $e);
        $this->assertStringContainsString('certificate', $e->getMessage());
    }

    public function testAClientCertificateIsPresentedWithCertAndSslKey(): void
    {
        $before = count(self::$nginx->requests('mtls'));
        $r = $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => $this->ca('client.key'),
        ])->get('/whoami');
        $this->assertSame(200, $r->status(), $r->body());
        $this->assertSame("client CN=resilient test client\n", $r->body());
        $seen = self::$nginx->waitForRequests('mtls', $before + 1);
        $this->assertCount($before + 1, $seen);
        $this->assertSame('CN=resilient test client', end($seen)['client'], 'nginx verified the client certificate');
    }

    public function testCertAndSslKeyAreAlsoPerRequestOptions(): void
    {
        $client = $this->client(self::$nginx->url('mtls'), ['verify' => $this->ca()]);
        $r = $client->get('/whoami', null, ['cert' => $this->ca('client.pem'), 'ssl_key' => $this->ca('client.key')]);
        $this->assertSame(200, $r->status(), $r->body());
        $this->assertSame(400, $client->get('/whoami')->status(), 'the client itself has no certificate');
    }

    public function testAnEncryptedPkcs8KeyIsUsedWithItsPassword(): void
    {
        $key = $this->ca('client-encrypted.key');
        $this->assertStringStartsWith('-----BEGIN ENCRYPTED PRIVATE KEY-----', (string) file_get_contents($key));
        $r = $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => [$key, TestCa::CLIENT_KEY_PASSWORD],
        ])->get('/whoami');
        $this->assertSame(200, $r->status(), $r->body());
        $this->assertSame("client CN=resilient test client\n", $r->body());
    }

    public function testACertificateFileWithItsKeyInsideIsUsed(): void
    {
        foreach ([$this->ca('client-with-key.pem'), [$this->ca('client-with-encrypted-key.pem'), TestCa::CLIENT_KEY_PASSWORD]] as $cert) {
            $r = $this->client(self::$nginx->url('mtls'), ['verify' => $this->ca(), 'cert' => $cert])->get('/whoami');
            $this->assertSame(200, $r->status(), json_encode($cert) . ': ' . $r->body());
            $this->assertSame("client CN=resilient test client\n", $r->body());
        }
    }

    public function testAPoolOverHttpsMultiplexesOnOneHttp2Connection(): void
    {
        $before = count(self::$nginx->requests('ok'));
        $client = $this->client(self::$nginx->url('ok'), ['verify' => $this->ca()]);
        $requests = [];
        for ($i = 0; $i < 100; $i++) {
            $requests["r$i"] = ['GET', "/hello?i=$i"];
        }
        $results = $client->pool($requests, 16);
        foreach ($results as $k => $r) {
            $this->assertInstanceOf(\Resilient\Response::class, $r, "$k: " . ($r instanceof \Throwable ? self::describe($r) : ''));
            $this->assertSame(200, $r->status());
        }
        $rows = array_slice(self::$nginx->waitForRequests('ok', $before + 100), $before);
        $this->assertCount(100, $rows);
        $this->assertSame(['HTTP/2.0'], array_values(array_unique(array_column($rows, 'protocol'))));
        $connections = array_count_values(array_column($rows, 'connection'));
        $this->assertCount(1, $connections, 'connections used (id => requests): ' . json_encode($connections));
    }

    public function testWithoutAClientCertificateNginxAnswers400Once(): void
    {
        // First a client WITH the certificate in this process: its connection must not be
        // reused by the client without one. Requests are told apart in nginx's log by a marker
        // in their query (nginx logs a request just after answering it, so counting lines
        // right after an answer races with the log).
        $id = bin2hex(random_bytes(4));
        $with = $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => $this->ca('client.key'),
        ]);
        $this->assertSame(200, $with->get('/whoami', ['probe' => "$id-with"])->status());
        $withConnection = $this->loggedOnce("$id-with")['connection'];

        $r = $this->client(self::$nginx->url('mtls'), ['verify' => $this->ca()])->get('/whoami', ['probe' => "$id-without"]);
        $this->assertSame(400, $r->status());
        $this->assertStringContainsString('No required SSL certificate was sent', $r->body());
        $this->assertSame(1, $r->attempts());
        $without = $this->loggedOnce("$id-without");
        $this->assertSame('-', $without['client']);
        $this->assertNotSame($withConnection, $without['connection'], 'a connection of another identity is not reused');
    }

    /** The one mtls log line whose request carries `$marker` (waits for nginx to write it). */
    private function loggedOnce(string $marker): array
    {
        $rows = [];
        $this->waitFor(function () use ($marker, &$rows) {
            $rows = array_values(array_filter(self::$nginx->requests('mtls'), fn (array $r) => str_contains($r['request'], $marker)));
            return $rows !== [] ? true : null;
        }, 5.0, "nginx's log line of $marker");
        $this->assertCount(1, $rows, "exactly one request carried $marker");

        return $rows[0];
    }

    public function testAClientCertificateFromAnUntrustedCaIsRejectedByNginx(): void
    {
        $r = $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('stranger.pem'),
            'ssl_key' => $this->ca('stranger.key'),
        ])->get('/whoami');
        $this->assertSame(400, $r->status());
        $this->assertStringContainsString('The SSL certificate error', $r->body());
    }

    public function testAWrongKeyPasswordIsRefusedNamingTheOption(): void
    {
        $e = self::thrown(fn () => $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => [$this->ca('client-encrypted.key'), 'not the password'],
        ])->get('/whoami'));
        $this->assertTrue($e instanceof \ValueError || $e instanceof \InvalidArgumentException, self::describe($e));
        $this->assertStringContainsString("'ssl_key", $e->getMessage());
        $this->assertStringNotContainsString('unknown option', $e->getMessage());
        $this->assertStringNotContainsString('not the password', $e->getMessage(), 'the password is a secret');
        $this->assertSame([], $this->attemptLog, 'refused before any attempt');
    }

    /**
     * A password given with `cert` (its file holds the key) that is wrong, or that the file
     * needs none for, is the `cert` option's problem: it said 'ssl_key', an option not given.
     */
    public function testAPasswordGivenWithCertIsRefusedNamingCert(): void
    {
        foreach ([[$this->ca('client-with-encrypted-key.pem'), 'not the password'], [$this->ca('client-with-key.pem'), 'not needed']] as $cert) {
            $e = self::thrown(fn () => $this->client(self::$nginx->url('mtls'), ['verify' => $this->ca(), 'cert' => $cert])->get('/whoami'));
            $this->assertTrue($e instanceof \ValueError || $e instanceof \InvalidArgumentException, self::describe($e));
            $this->assertStringContainsString("option 'cert'", $e->getMessage());
            $this->assertStringNotContainsString('ssl_key', $e->getMessage());
            $this->assertStringNotContainsString($cert[1], $e->getMessage(), 'the password is a secret');
        }
        // The same file given as `ssl_key` with its password: that option's problem.
        $file = $this->ca('client-with-encrypted-key.pem');
        $e = self::thrown(fn () => $this->client(self::$nginx->url('mtls'), ['verify' => $this->ca(), 'cert' => $file, 'ssl_key' => [$file, 'not the password']])->get('/whoami'));
        $this->assertStringContainsString("option 'ssl_key'", $e->getMessage());
        $this->assertSame([], $this->attemptLog, 'refused before any attempt');
    }

    public function testAnEncryptedKeyWithoutItsPasswordIsRefusedNamingSslKey(): void
    {
        $e = self::thrown(fn () => $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => $this->ca('client-encrypted.key'),
        ])->get('/whoami'));
        $this->assertTrue($e instanceof \ValueError || $e instanceof \InvalidArgumentException, self::describe($e));
        $this->assertStringContainsString("option 'ssl_key", $e->getMessage(), 'the key is the problem, not the certificate');
        $this->assertStringContainsString('password', $e->getMessage());
        $this->assertSame([], $this->attemptLog);
    }

    public function testACertificateAndAKeyThatDoNotBelongTogetherAreRefusedBeforeAnyAttempt(): void
    {
        $e = self::thrown(fn () => $this->client(self::$nginx->url('mtls'), [
            'verify' => $this->ca(),
            'cert' => $this->ca('client.pem'),
            'ssl_key' => $this->ca('stranger.key'),
        ])->get('/whoami'));
        $this->assertTrue($e instanceof \ValueError || $e instanceof \InvalidArgumentException, self::describe($e));
        $this->assertMatchesRegularExpression("/option '(cert|ssl_key)'/", $e->getMessage());
        $this->assertSame([], $this->attemptLog, 'a configuration mistake is not an upstream failure to retry');
    }

    public function testMissingCertificateFilesAreRefusedNamingTheOption(): void
    {
        $missing = self::$ca->dir . '/no-such.pem';
        foreach (['verify' => $missing, 'cert' => $missing, 'ssl_key' => $missing] as $option => $value) {
            $e = self::thrown(fn () => $this->client(self::$nginx->url('ok'), [$option => $value] + ($option === 'verify' ? [] : ['cert' => $this->ca('client.pem'), 'ssl_key' => $this->ca('client.key')]))->get('/hello'));
            $this->assertTrue($e instanceof \ValueError || $e instanceof \InvalidArgumentException, "$option: " . self::describe($e));
            $this->assertStringContainsString("'$option", $e->getMessage());
            $this->assertStringNotContainsString('unknown option', $e->getMessage());
        }
    }
}
