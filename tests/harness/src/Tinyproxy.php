<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * A real forward proxy (Debian's tinyproxy) on a free loopback port, in the foreground (`-d`)
 * with a generated config, tracked like every service of the run and stopped with it.
 *
 * It forwards plain HTTP requests with a `Via: 1.1 <VIA_NAME> (tinyproxy/...)` header (so the
 * upstream's records show whether a request came through it) and tunnels HTTPS with CONNECT.
 * Its log (level Info) has a `Request (file descriptor N): GET http://... HTTP/1.1` or
 * `Request (file descriptor N): CONNECT host:port HTTP/1.1` line per request: requests() reads
 * them.
 */
final class Tinyproxy
{
    public const VIA_NAME = 'resilient-test-proxy';

    public readonly string $dir;
    public readonly int $port;
    private ?ServiceProcess $process = null;
    private static ?self $shared = null;

    /** One proxy for the whole PHPUnit run; stopped when PHPUnit exits. */
    public static function shared(): self
    {
        if (self::$shared === null) {
            self::$shared = new self();
            register_shutdown_function([self::$shared, 'stop']);
        }
        return self::$shared;
    }

    public function __construct()
    {
        $bin = is_executable('/usr/bin/tinyproxy') ? '/usr/bin/tinyproxy' : 'tinyproxy';
        $this->dir = Run::tempDir('tinyproxy');
        $this->port = Run::freePort();
        $d = $this->dir;
        // As root tinyproxy drops to User/Group; nobody could not write the run's 0700 dirs.
        $user = posix_geteuid() === 0 ? "User root\nGroup root\n" : '';
        file_put_contents("$d/tinyproxy.conf", <<<CONF
            {$user}Port {$this->port}
            Listen 127.0.0.1
            Timeout 30
            LogFile "$d/tinyproxy.log"
            LogLevel Info
            PidFile "$d/tinyproxy.pid"
            MaxClients 50
            Allow 127.0.0.1
            ViaProxyName "{$this->viaName()}"
            CONF);
        $this->process = ServiceProcess::start([$bin, '-d', '-c', "$d/tinyproxy.conf"], "$d/tinyproxy");
        $end = microtime(true) + 10;
        while (microtime(true) < $end && $this->process->isRunning()) {
            $s = @stream_socket_client("tcp://127.0.0.1:{$this->port}", $errno, $errstr, 0.2);
            if ($s !== false) {
                fclose($s);
                return;
            }
            usleep(20_000);
        }
        $logs = $this->logs();
        $this->stop();
        throw new \RuntimeException("tinyproxy did not come up on port {$this->port}:\n$logs");
    }

    public function viaName(): string
    {
        return self::VIA_NAME;
    }

    public function url(): string
    {
        return "http://127.0.0.1:{$this->port}";
    }

    /**
     * The request lines tinyproxy logged, e.g. "GET http://127.0.0.1:1234/k/x/y HTTP/1.1" or
     * "CONNECT 127.0.0.1:4433 HTTP/1.1", in order.
     *
     * @return list<string>
     */
    public function requests(): array
    {
        $out = [];
        foreach (file("{$this->dir}/tinyproxy.log", FILE_IGNORE_NEW_LINES) ?: [] as $line) {
            if (preg_match('/Request \(file descriptor \d+\): (.+)$/', $line, $m)) {
                $out[] = trim($m[1]);
            }
        }
        return $out;
    }

    /** Logged request lines containing $needle (a key, a host:port). */
    public function requestsMatching(string $needle): array
    {
        return array_values(array_filter($this->requests(), static fn (string $l) => str_contains($l, $needle)));
    }

    public function logs(): string
    {
        return '--- tinyproxy.log' . "\n" . substr((string) @file_get_contents("{$this->dir}/tinyproxy.log"), -3000)
            . "\n--- stderr\n" . substr((string) @file_get_contents("{$this->dir}/tinyproxy.err"), -2000);
    }

    public function stop(): void
    {
        $this->process?->stop();
        $this->process = null;
    }

    public function __destruct()
    {
        $this->stop();
    }
}
