<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * A throw-away PKI made with the `openssl` command line in a directory of the run, for the TLS
 * suites (real nginx, real handshakes):
 *
 *   ca.pem / ca.key                  the test CA (EC P-256), trusted only through `verify => ca.pem`
 *   server.pem / server.key          for IP 127.0.0.1 and DNS localhost, signed by the CA
 *   wrong-host.pem / .key            for DNS wrong-host.example only (a host name mismatch on 127.0.0.1)
 *   expired.pem / .key               127.0.0.1 + localhost, valid in January 2020 only (`openssl ca`)
 *   client-ca.pem / .key             a second CA that nginx trusts for client certificates
 *   client.pem / client.key          a client certificate (RSA 2048, clientAuth) from client-ca
 *   client-encrypted.key             the same key as encrypted PKCS#8 (AES-256-CBC, PBKDF2), password CLIENT_KEY_PASSWORD
 *   client-with-key.pem              client.pem followed by client.key (one file, as Guzzle's `cert` allows)
 *   client-with-encrypted-key.pem    client.pem followed by client-encrypted.key
 *   stranger.pem / stranger.key      a client certificate from a CA nobody trusts
 *
 * Everything is made once per directory (about a second of openssl) and only read afterwards.
 */
final class TestCa
{
    public const CLIENT_KEY_PASSWORD = 'pkcs8-test-password';

    private static ?self $shared = null;

    public readonly string $dir;

    /** The run's one CA (made on first use in Run::dir()/test-ca). */
    public static function shared(): self
    {
        return self::$shared ??= new self(Run::dir() . '/test-ca');
    }

    public function __construct(string $dir)
    {
        $this->dir = $dir;
        if (!is_file("$dir/done")) {
            @mkdir($dir, 0700, true);
            $this->make();
            touch("$dir/done");
        }
    }

    /** Path of one of the files listed above. */
    public function path(string $file): string
    {
        $p = "{$this->dir}/$file";
        if (!is_file($p)) {
            throw new \RuntimeException("no $file in the test CA directory {$this->dir}");
        }
        return $p;
    }

    private function make(): void
    {
        $d = $this->dir;
        $this->caCert('ca', 'resilient test CA');
        $this->caCert('client-ca', 'resilient test client CA');
        $this->caCert('stranger-ca', 'resilient nobody trusts this CA');

        $server = "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\n"
            . "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\n";
        $this->leaf('server', 'ca', '127.0.0.1', $server);
        $this->leaf('wrong-host', 'ca', 'wrong-host.example', str_replace(
            'IP:127.0.0.1,DNS:localhost',
            'DNS:wrong-host.example',
            $server,
        ));

        $client = "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\n"
            . "extendedKeyUsage=clientAuth\n";
        $this->leaf('client', 'client-ca', 'resilient test client', $client, rsa: true);
        $this->leaf('stranger', 'stranger-ca', 'resilient stranger', $client);
        self::openssl(['pkcs8', '-topk8', '-in', "$d/client.key", '-out', "$d/client-encrypted.key",
            '-v2', 'aes-256-cbc', '-v2prf', 'hmacWithSHA256', '-passout', 'pass:' . self::CLIENT_KEY_PASSWORD]);
        // Guzzle's `cert` may name one PEM holding the certificate and its (encrypted) key.
        file_put_contents("$d/client-with-key.pem", file_get_contents("$d/client.pem") . file_get_contents("$d/client.key"));
        file_put_contents("$d/client-with-encrypted-key.pem", file_get_contents("$d/client.pem") . file_get_contents("$d/client-encrypted.key"));

        // An expired certificate needs explicit dates: `openssl ca` with a minimal database.
        @mkdir("$d/ca-db", 0700);
        file_put_contents("$d/ca-db/index.txt", '');
        file_put_contents("$d/ca-db/serial", "1000\n");
        file_put_contents("$d/ca-db/ca.cnf", <<<CNF
            [ca]
            default_ca = test
            [test]
            database = $d/ca-db/index.txt
            new_certs_dir = $d/ca-db
            serial = $d/ca-db/serial
            default_md = sha256
            policy = any
            unique_subject = no
            [any]
            commonName = supplied
            [server_ext]
            $server
            CNF);
        self::openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', "$d/expired.key"]);
        self::openssl(['req', '-new', '-key', "$d/expired.key", '-subj', '/CN=127.0.0.1', '-out', "$d/expired.csr"]);
        self::openssl(['ca', '-batch', '-config', "$d/ca-db/ca.cnf", '-cert', "$d/ca.pem", '-keyfile', "$d/ca.key",
            '-in', "$d/expired.csr", '-out', "$d/expired.pem", '-notext', '-extensions', 'server_ext',
            '-startdate', '20200101000000Z', '-enddate', '20200201000000Z']);
    }

    private function caCert(string $name, string $cn): void
    {
        $d = $this->dir;
        self::openssl(['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', "$d/$name.key"]);
        self::openssl(['req', '-x509', '-new', '-key', "$d/$name.key", '-subj', "/CN=$cn", '-days', '3',
            '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign',
            '-out', "$d/$name.pem"]);
    }

    private function leaf(string $name, string $ca, string $cn, string $ext, bool $rsa = false): void
    {
        $d = $this->dir;
        $alg = $rsa ? ['-algorithm', 'RSA', '-pkeyopt', 'rsa_keygen_bits:2048'] : ['-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256'];
        self::openssl(['genpkey', ...$alg, '-out', "$d/$name.key"]);
        self::openssl(['req', '-new', '-key', "$d/$name.key", '-subj', "/CN=$cn", '-out', "$d/$name.csr"]);
        file_put_contents("$d/$name.ext", $ext);
        self::openssl(['x509', '-req', '-in', "$d/$name.csr", '-CA', "$d/$ca.pem", '-CAkey', "$d/$ca.key",
            '-set_serial', (string) random_int(1, PHP_INT_MAX), '-days', '3', '-sha256',
            '-extfile', "$d/$name.ext", '-out', "$d/$name.pem"]);
    }

    /** @param list<string> $args */
    public static function openssl(array $args): string
    {
        $proc = proc_open(['openssl', ...$args], [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes);
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot run openssl');
        }
        $out = stream_get_contents($pipes[1]);
        $err = stream_get_contents($pipes[2]);
        fclose($pipes[1]);
        fclose($pipes[2]);
        $rc = proc_close($proc);
        if ($rc !== 0) {
            throw new \RuntimeException('openssl ' . implode(' ', $args) . " failed ($rc): $err");
        }
        return (string) $out;
    }
}
