<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

require_once dirname(__DIR__) . '/Http/support/MockUpstream.php';

use Resilient\Metrics;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * The Prometheus exposition is valid: it passes `promtool check metrics`, and a real Prometheus
 * server (Debian's, started here on loopback with its own config) scrapes an endpoint serving
 * `Metrics::prometheus()` (`php -S` with the extension): the target is up, and counters and a
 * histogram's count queried through Prometheus's HTTP API equal the extension's snapshot.
 */
final class PrometheusTest extends TestCase
{
    private static string $name;
    /** @var list<ServiceProcess> */
    private array $services = [];

    public static function setUpBeforeClass(): void
    {
        // Real calls from another process: 503s, 200s, a retry budget.
        $up = MockUpstream::shared();
        self::$name = Run::name('metrics-prom');
        $key = $up->key('metrics-prom');
        $up->script($key, [['status' => 503], ['status' => 200], ['status' => 503], ['status' => 503], ['status' => 404]], 'cycle');
        $spec = base64_encode(json_encode([
            'name' => self::$name,
            'options' => [
                'base_url' => $up->base($key),
                'max_attempts' => 2,
                'backoff' => ['base' => 0.001, 'cap' => 0.002],
                'budget' => ['ratio' => 0.1, 'floor' => 2, 'window' => 60],
            ],
            'path' => '/x',
            'calls' => 20,
        ]));
        $r = PhpProcess::runScript(dirname(__DIR__) . '/Http/fixtures/call.php', [$spec]);
        if ($r->exitCode !== 0) {
            throw new \RuntimeException($r->describe());
        }
    }

    protected function tearDown(): void
    {
        foreach ($this->services as $s) {
            $s->stop();
        }
    }

    private static function promtool(string $text): array
    {
        $file = Run::tempDir('promtool') . '/metrics.prom';
        file_put_contents($file, $text);
        exec('promtool check metrics < ' . escapeshellarg($file) . ' 2>&1', $out, $rc);
        return [$rc, implode("\n", $out)];
    }

    public function testTheExpositionPassesPromtool(): void
    {
        $text = Metrics::prometheus();
        $this->assertStringContainsString('resilient_attempts_total{upstream="' . self::$name . '"}', $text);
        [$rc, $out] = self::promtool($text);
        $this->assertSame(0, $rc, $out);
        $this->assertSame('', $out, 'no lint remark');
        // Only the allowed labels.
        preg_match_all('/^[a-z_]+\{([^}]*)\}/m', $text, $m);
        foreach ($m[1] as $labels) {
            preg_match_all('/([a-z_]+)="/', $labels, $names);
            $this->assertSame([], array_diff($names[1], ['upstream', 'reason', 'outcome', 'le']), $labels);
        }
        // The CLI script without Laravel prints the same thing (counters do not move meanwhile).
        $cli = PhpProcess::runScript(Run::root() . '/php/bin/resilient-metrics');
        $this->assertSame(0, $cli->exitCode, $cli->describe());
        $this->assertSame($text, $cli->stdout);
        $json = PhpProcess::runScript(Run::root() . '/php/bin/resilient-metrics', ['--json'])->json();
        $this->assertSame(Metrics::snapshot()[self::$name], $json[self::$name]);
    }

    public function testARealPrometheusScrapesItAndAgreesWithTheSnapshot(): void
    {
        $dir = Run::tempDir('prometheus');
        $webPort = Run::freePort();
        $this->services[] = ServiceProcess::start([
            Run::root() . '/tests/harness/php.sh', '-d', 'resilient.shm_path=' . ini_get('resilient.shm_path'),
            '-S', "127.0.0.1:$webPort", __DIR__ . '/fixtures/metrics_endpoint.php',
        ], "$dir/endpoint");
        $promPort = Run::freePort();
        file_put_contents("$dir/prometheus.yml", <<<YML
            global:
              scrape_interval: 1s
              scrape_timeout: 1s
            scrape_configs:
              - job_name: resilient
                static_configs:
                  - targets: ['127.0.0.1:$webPort']
            YML);
        $this->services[] = ServiceProcess::start([
            'prometheus', "--config.file=$dir/prometheus.yml", "--storage.tsdb.path=$dir/data",
            "--web.listen-address=127.0.0.1:$promPort", '--log.level=warn',
        ], "$dir/prometheus");
        $api = fn (string $path) => json_decode((string) @file_get_contents("http://127.0.0.1:$promPort/api/v1/$path"), true);

        [$target] = $this->waitFor(function () use ($api) {
            $t = $api('targets')['data']['activeTargets'][0] ?? null;
            return ($t['health'] ?? '') === 'up' ? $t : null;
        }, 30.0, 'the scrape target to be up (' . @file_get_contents("$dir/prometheus.err") . ')', 0.1);
        $this->assertSame('', $target['lastError']);

        $snapshot = Metrics::snapshot()[self::$name];
        $query = function (string $expr) use ($api) {
            $r = $api('query?query=' . rawurlencode($expr))['data']['result'] ?? [];
            return $r === [] ? null : $r[0]['value'][1];
        };
        $sel = '{upstream="' . self::$name . '"}';
        [$attempts] = $this->waitFor(fn () => $query("resilient_attempts_total$sel"), 10.0, 'the first scrape', 0.1);
        $this->assertSame((string) $snapshot['attempts'], $attempts);
        $this->assertSame((string) $snapshot['originals'], $query("resilient_originals_total$sel"));
        $this->assertSame((string) $snapshot['retries_denied'], $query('resilient_refusals_total{upstream="' . self::$name . '",reason="budget"}'));
        $this->assertSame((string) $snapshot['failures']['5xx'], $query('resilient_upstream_failures_total{upstream="' . self::$name . '",outcome="5xx"}'));
        $this->assertSame((string) $snapshot['latency']['failure']['count'], $query('resilient_attempt_duration_seconds_count{upstream="' . self::$name . '",outcome="failure"}'));
        $this->assertGreaterThan(0, $snapshot['attempts']);
        fwrite(STDERR, sprintf("\n[prometheus] target up; resilient_attempts_total = %s (snapshot %d)\n", $attempts, $snapshot['attempts']));
    }
}
