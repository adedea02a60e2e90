<?php

declare(strict_types=1);

namespace Resilient\Tests\Redis;

require_once __DIR__ . '/../Http/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Http\HttpTestCase;

/**
 * A Redis Cluster of three masters started here on loopback, the backend URL naming the first:
 * two "hosts" (groups of CLI processes with their own segments) share a funnel whose slot
 * another node serves. The client follows the cluster's MOVED to that node, so the one limit
 * holds across both hosts. `on_backend_error` is `open`: calls that fell back would all go
 * through, and the upstream would see them.
 */
final class ClusterTest extends HttpTestCase
{
    /** @var list<ServiceProcess> */
    private static array $nodes = [];
    /** @var list<int> */
    private static array $ports = [];
    /** @var list<int> */
    private static array $busPorts = [];

    public static function setUpBeforeClass(): void
    {
        foreach ([0, 1, 2] as $i) {
            self::startNode($i);
        }
        foreach ([[0, 5460], [5461, 10922], [10923, 16383]] as $i => [$first, $last]) {
            self::cli($i, 'CLUSTER', 'ADDSLOTSRANGE', (string) $first, (string) $last);
        }
        foreach ([1, 2] as $i) {
            self::cli(0, 'CLUSTER', 'MEET', '127.0.0.1', (string) self::$ports[$i], (string) self::$busPorts[$i]);
        }
        $until = microtime(true) + 10;
        foreach ([0, 1, 2] as $i) {
            while (!str_contains($info = self::cli($i, 'CLUSTER', 'INFO'), 'cluster_state:ok')
                || !str_contains($info, 'cluster_known_nodes:3')) {
                if (microtime(true) > $until) {
                    throw new \RuntimeException("cluster node $i did not become ok: $info");
                }
                usleep(20_000);
            }
        }
    }

    public static function tearDownAfterClass(): void
    {
        foreach (self::$nodes as $node) {
            $node->stop();
        }
        self::$nodes = [];
        self::$ports = [];
        self::$busPorts = [];
    }

    /**
     * Starts node $i on free ports, again on other ones if it does not come up as itself: a
     * port that accepts may belong to a node about to exit, or to another server that took the
     * port between the pick and the bind.
     */
    private static function startNode(int $i): void
    {
        for ($try = 0; $try < 5; $try++) {
            [$port, $bus] = [Run::freePort(), Run::freePort()];
            $dir = Run::tempDir("cluster-$i");
            $node = ServiceProcess::start(
                ['redis-server', '--bind', '127.0.0.1', '--port', (string) $port, '--save', '', '--appendonly', 'no',
                    '--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--dir', $dir,
                    // Its own bus port, picked free: the default, port + 10000, may be another
                    // socket's, and the node then exits just after its port opened.
                    '--cluster-port', (string) $bus],
                $dir . '/redis-' . hrtime(true),
            );
            $until = microtime(true) + 5;
            while (($serving = self::servingPid($port)) === null && $node->isRunning() && microtime(true) < $until) {
                usleep(10_000);
            }
            if ($serving === $node->pid) {
                [self::$nodes[$i], self::$ports[$i], self::$busPorts[$i]] = [$node, $port, $bus];

                return;
            }
            $node->stop();
        }
        throw new \RuntimeException("cluster node $i did not start on five pairs of ports");
    }

    /** The process id of the Redis serving $port (INFO server), or null when none answers. */
    private static function servingPid(int $port): ?int
    {
        $s = @fsockopen('127.0.0.1', $port, $errno, $errstr, 0.5);
        if ($s === false) {
            return null;
        }
        stream_set_timeout($s, 0, 500_000);
        fwrite($s, "INFO server\r\n");
        $info = '';
        while (!str_contains($info, 'run_id:') && ($line = fgets($s)) !== false) {
            $info .= $line;
        }
        fclose($s);

        return preg_match('/^process_id:(\d+)/m', $info, $m) === 1 ? (int) $m[1] : null;
    }

    private static function cli(int $node, string ...$args): string
    {
        $cmd = 'redis-cli -p ' . self::$ports[$node] . ' ' . implode(' ', array_map('escapeshellarg', $args));
        return trim((string) shell_exec($cmd));
    }

    /** A client name whose keys node $node serves. */
    private static function nameOn(int $node): string
    {
        for ($i = 0; ; $i++) {
            $name = Run::name("cluster$i");
            $slot = (int) self::cli(0, 'CLUSTER', 'KEYSLOT', '{' . $name . '}');
            if (self::owner($slot) === $node) {
                return $name;
            }
        }
    }

    private static function owner(int $slot): int
    {
        return $slot <= 5460 ? 0 : ($slot <= 10922 ? 1 : 2);
    }

    public function testTwoHostsShareOneFunnelKeptOnTheNodeServingItsSlot(): void
    {
        $name = self::nameOn(2);
        $prefix = Run::id() . ':';
        $url = 'redis://127.0.0.1:' . self::$ports[0] . '/0?prefix=' . $prefix;
        $key = $this->up->key('cluster-funnel');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 40]]);
        $options = ['funnel' => ['limit' => 4, 'wait' => 0.0], 'timeout' => 2.0, 'max_attempts' => 1, 'budget' => false,
            'backend' => $url, 'on_backend_error' => 'open', 'base_url' => $this->up->base($key)];

        $go = Run::dir() . '/go-' . $name;
        $procs = [];
        foreach ([0, 1] as $host) {
            $shm = Run::shmPath("cluster-host$host-" . substr($name, -8));
            for ($i = 0; $i < 6; $i++) {
                $spec = base64_encode(json_encode(['name' => $name, 'options' => $options, 'path' => '/x', 'go_file' => $go]));
                $procs[] = PhpProcess::script(__DIR__ . '/fixtures/host.php', [$spec], ['resilient.shm_path' => $shm]);
            }
        }
        foreach ($procs as $p) {
            $this->assertTrue($p->waitForOutput(fn (string $o) => str_contains($o, 'ready'), 20.0), 'a host process did not start');
        }
        file_put_contents($go, json_encode(['stop_at' => microtime(true) + 1.5]));
        $answers = [];
        foreach ($procs as $p) {
            $r = $p->wait(25.0);
            $lines = array_values(array_filter(explode("\n", trim($r->stdout))));
            $answer = json_decode((string) end($lines), true);
            $this->assertIsArray($answer, $r->describe());
            $answers[] = $answer;
        }

        $max = max(array_map(fn ($a) => (int) $a['max_concurrent'], $this->up->attempts($key, 1)));
        $ok = array_sum(array_map(fn ($a) => $a['classes']['Resilient\\Response'] ?? 0, $answers));
        $full = array_sum(array_map(fn ($a) => $a['classes']['Resilient\\FunnelFull'] ?? 0, $answers));
        $this->assertSame(0, array_sum(array_column($answers, 'backend_fallbacks')), 'the cluster answered every time');
        $this->assertLessThanOrEqual(4, $max, 'one limit of 4 across both hosts');
        $this->assertGreaterThanOrEqual(3, $max, 'the limit was reached');
        $this->assertGreaterThan(0, $full, 'refused by the cluster node');
        $this->assertSame('0', self::cli(2, 'ZCARD', $prefix . '{' . $name . '}:funnel'), 'every slot given back on node 2');
        fwrite(STDERR, sprintf("\n[redis cluster] 2 hosts × 6 processes, funnel limit 4 on the third node: upstream saw at most %d at once (%d answered, %d funnel full)\n", $max, $ok, $full));
    }
}
