<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A host name is looked up on a thread (`getaddrinfo` cannot be cut short), and the call waits
 * for it only as long as its connect may. What a resolver that does not answer, or a process
 * that may start no thread, must not do: a thread left behind by every call, a thread that
 * takes PHP's signals, or a Rust panic in place of the call's failure. Both need root: a resolver of the test's own in a mount
 * namespace, and a process limit for the user `nobody`.
 */
final class HostLookupTest extends TestCase
{
    protected function setUp(): void
    {
        if (posix_geteuid() !== 0) {
            $this->markTestSkipped('needs root (a mount namespace, another user)');
        }
    }

    /** A PHP child through a wrapper of tests/Client/fixtures used as PHP_BIN. */
    private function child(string $wrapper, string $code, array $ini = [], array $env = []): array
    {
        $r = PhpProcess::code($code, $ini, $env + [
            'PHP_BIN' => __DIR__ . "/fixtures/$wrapper",
            'PHP_REAL' => (string) (getenv('PHP_BIN') ?: 'php8.2'),
        ])->wait(30.0);
        if ($r->stdout === '' && str_contains($r->stderr, 'Operation not permitted')) {
            $this->markTestSkipped("root without the capability the wrapper needs: {$r->stderr}");
        }
        $json = json_decode($r->stdout, true);
        $this->assertIsArray($json, "stdout: {$r->stdout}\nstderr: {$r->stderr}");

        return $json + ['stderr' => $r->stderr];
    }

    public function testCallsToAHostWhoseLookupHangsShareOneLookupThread(): void
    {
        // A name server that takes every question and answers none.
        $ns = sprintf('127.53.%d.%d', random_int(1, 250), random_int(1, 250));
        $server = @stream_socket_server("udp://$ns:53", $errno, $error, STREAM_SERVER_BIND);
        $this->assertNotFalse($server, "cannot listen on $ns:53: $error");
        $conf = Run::tempDir('resolver') . '/resolv.conf';
        file_put_contents($conf, "nameserver $ns\noptions timeout:10 attempts:1\n");
        chmod(dirname($conf), 0755);
        try {
            $out = $this->child('php-with-resolver.sh', <<<'PHP'
                $c = new Resilient\Client('lookup-' . getmypid(), ['base_url' => 'http://upstream.resilient-test:8080',
                    'connect_timeout' => 0.05, 'timeout' => 1.0, 'max_attempts' => 1, 'budget' => false]);
                $failed = 0; $slowest = 0.0;
                for ($i = 0; $i < 20; $i++) {
                    $t = microtime(true);
                    try { $c->get('/'); } catch (Resilient\UpstreamFailed $e) { $failed++; $last = $e->getMessage(); }
                    $slowest = max($slowest, microtime(true) - $t);
                }
                preg_match('/^Threads:\s+(\d+)/m', file_get_contents('/proc/self/status'), $m);
                $blocked = [];
                foreach (glob('/proc/self/task/*') as $task) {
                    if ((int) basename($task) !== getmypid()) {
                        preg_match('/^SigBlk:\s*([0-9a-f]+)/m', file_get_contents("$task/status"), $b);
                        $blocked[] = $b[1];
                    }
                }
                echo json_encode(['failed' => $failed, 'slowest_s' => $slowest, 'threads' => (int) $m[1],
                    'blocked' => $blocked, 'last' => $last ?? null]);
                PHP, [], ['RESOLV_CONF' => $conf]);
        } finally {
            fclose($server);
        }
        $this->assertSame(20, $out['failed'], $out['stderr']);
        $this->assertLessThan(0.5, $out['slowest_s'], 'each call waited for the lookup as long as its connect could');
        // PHP's thread and the one lookup under way (20 calls each starting one: 21).
        $this->assertLessThanOrEqual(2, $out['threads'], $out['last'] ?? '');
        // The lookup's thread, still waiting for the resolver, leaves signals to PHP's thread:
        // one sent to the process (a queue worker's pcntl_alarm, SIGTERM) would otherwise run
        // PHP's handler on it, beside the PHP thread, which pcntl's queue is not made for.
        $this->assertCount(1, $out['blocked']);
        $hex = str_pad($out['blocked'][0], 16, '0', STR_PAD_LEFT);
        foreach ([SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGTERM, SIGCHLD, SIGPROF] as $signal) {
            $bit = (hexdec($hex[15 - intdiv($signal - 1, 4)]) >> (($signal - 1) % 4)) & 1;
            $this->assertSame(1, $bit, "the lookup's thread blocks signal $signal (SigBlk $hex)");
        }
    }

    public function testAProcessThatMayStartNoThreadFailsTheCallAndItsFallbackAnswers(): void
    {
        $shm = '/tmp/resilient-test-' . Run::id() . '-nobody-' . bin2hex(random_bytes(4)) . '.shm';
        try {
            $out = $this->child('php-in-one-process.sh', <<<'PHP'
                $c = new Resilient\Client('nothread', ['base_url' => 'http://localhost:8080', 'timeout' => 1.0,
                    'max_attempts' => 2, 'funnel' => ['limit' => 2], 'budget' => false,
                    'fallback' => fn (Throwable $e) => get_class($e) . ': ' . $e->getMessage()]);
                $answers = [];
                for ($i = 0; $i < 2; $i++) {
                    try { $answers[] = $c->get('/'); } catch (Throwable $e) { $answers[] = 'thrown ' . get_class($e) . ': ' . $e->getMessage(); }
                }
                echo json_encode(['answers' => $answers, 'in_flight' => (new Resilient\Funnel('nothread', 2))->inFlight()]);
                PHP, ['resilient.shm_path' => $shm]);
        } finally {
            @unlink($shm);
        }
        foreach ($out['answers'] as $answer) {
            $this->assertStringStartsWith('Resilient\UpstreamFailed: ', $answer, $out['stderr']);
            $this->assertStringContainsString('thread', $answer, 'the message says what failed');
        }
        $this->assertStringNotContainsString('panic', $out['stderr']);
        $this->assertSame(0, $out['in_flight']);
    }
}
