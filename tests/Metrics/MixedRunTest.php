<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

require_once dirname(__DIR__) . '/Http/support/MockUpstream.php';

use Resilient\Metrics;
use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\HttpBatch;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * After a mixed run from several processes (8 php-fpm requests in
 * flight at once and 3 CLI processes, all on one upstream name, against the mock upstream
 * scripted with 503s and 200s, under a tight shared retry budget), the extension's host-wide
 * counters equal the upstream's own records and the callers' results: attempts counted ==
 * attempts the upstream saw; originals == calls made; retries denied == the budget refusals
 * the callers got; successes == the answers they got.
 */
final class MixedRunTest extends TestCase
{
    private const FPM_REQUESTS = 8;
    private const FPM_CALLS = 10;
    private const CLI_PROCESSES = 3;
    private const CLI_CALLS = 30;

    public function testCountersEqualTheUpstreamsRecordsAndTheCallersResults(): void
    {
        $up = MockUpstream::shared();
        $fpm = FpmServer::shared();
        $this->assertSame((string) ini_get('resilient.shm_path'), $fpm->shmPath, 'FPM, CLI and this test share one segment');
        $name = Run::name('metrics-mixed');
        $key = $up->key('metrics-mixed');
        // 503, 503, 200, 503, 200 over and over: retries succeed, fail and get denied.
        $up->script($key, [['status' => 503], ['status' => 503], ['status' => 200], ['status' => 503], ['status' => 200]], 'cycle');
        $spec = [
            'name' => $name,
            'options' => [
                'base_url' => $up->base($key),
                'max_attempts' => 3,
                'timeout' => 5.0,
                'backoff' => ['base' => 0.001, 'cap' => 0.003],
                'budget' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60],
            ],
            'path' => '/quote',
        ];
        $arg = fn (int $calls) => base64_encode(json_encode($spec + ['calls' => $calls]));

        $cli = [];
        for ($i = 0; $i < self::CLI_PROCESSES; $i++) {
            $cli[] = PhpProcess::script(dirname(__DIR__) . '/Http/fixtures/call.php', [$arg(self::CLI_CALLS)]);
        }
        $urls = [];
        for ($i = 0; $i < self::FPM_REQUESTS; $i++) {
            $urls[] = $fpm->url('/?do=call&spec=' . rawurlencode($arg(self::FPM_CALLS)));
        }
        $web = (new HttpBatch($urls, 60.0))->results(60.0);

        $results = [];
        $sapis = [];
        foreach ($web as $data) {
            $this->assertArrayHasKey('results', $data, json_encode($data));
            $sapis[] = $data['sapi'];
            array_push($results, ...$data['results']);
        }
        foreach ($cli as $p) {
            $data = $p->wait(60.0)->json();
            $sapis[] = $data['sapi'];
            array_push($results, ...$data['results']);
        }
        $sapis = array_count_values($sapis);
        $this->assertSame([self::FPM_REQUESTS, self::CLI_PROCESSES], [$sapis['fpm-fcgi'] ?? 0, $sapis['cli'] ?? 0]);
        $calls = self::FPM_REQUESTS * self::FPM_CALLS + self::CLI_PROCESSES * self::CLI_CALLS;
        $this->assertCount($calls, $results);

        $seen = count($up->attempts($key, 0));
        $m = Metrics::snapshot()[$name] ?? null;
        $this->assertIsArray($m, 'the name is in the snapshot');
        $classes = array_count_values(array_map(fn ($r) => $r['ok'] ? 'ok' : $r['class'], $results));
        $answers = count(array_filter($results, fn ($r) => $r['ok'] && $r['status'] < 400));
        $attemptsReported = array_sum(array_map(fn ($r) => count($r['records']), $results));

        $this->assertSame($seen, $m['attempts'], 'attempts counted == attempts the upstream saw');
        $this->assertSame($attemptsReported, $m['attempts'], 'attempts counted == on_attempt records');
        $this->assertSame($calls, $m['originals'], 'originals == calls made');
        $this->assertSame($classes['Resilient\\BudgetExhausted'] ?? 0, $m['retries_denied'], 'retries denied == budget refusals seen');
        $this->assertSame($m['retries_denied'], $m['shed']['budget']);
        $this->assertGreaterThan(0, $m['retries_denied'], 'the budget was exercised: ' . json_encode($classes));
        $this->assertSame($answers, $m['successes'], 'successes == answers the callers got');
        $this->assertSame($m['attempts'] - $m['originals'], $m['retries'], 'every attempt after a first is a retry');
        $this->assertSame($m['failures']['5xx'], $m['latency']['failure']['count']);
        $this->assertSame($m['attempts'], $m['latency']['success']['count'] + $m['latency']['failure']['count']);
        $this->assertSame(0, $m['in_flight']);
        $this->assertSame(0, $m['shed']['funnel'] + $m['shed']['circuit']);
        $upstream503 = count(array_filter($up->attempts($key, 0), fn ($a) => $a['status'] === 503));
        $this->assertSame($upstream503, $m['failures']['5xx'], '5xx counted == 503s the upstream sent');

        fwrite(STDERR, sprintf(
            "\n[metrics] %d calls from %d FPM requests + %d CLI processes: upstream saw %d attempts, counted %d; retries %d sent, %d succeeded, %d denied (%s)\n",
            $calls, self::FPM_REQUESTS, self::CLI_PROCESSES, $seen, $m['attempts'], $m['retries'], $m['retries_succeeded'], $m['retries_denied'], json_encode($classes),
        ));
    }

    public function testResetZeroesOnlyTheNameAskedAndSurvivesTheProcessesThatWrote(): void
    {
        $a = Run::name('metrics-reset-a');
        $b = Run::name('metrics-reset-b');
        // Written by processes that have exited since.
        $r = PhpProcess::runCode("Resilient\\Metrics::recordSynthetic('$a', 5); Resilient\\Metrics::recordSynthetic('$b', 7);");
        $this->assertSame(0, $r->exitCode, $r->describe());
        $s = Metrics::snapshot();
        $this->assertSame([5, 7], [$s[$a]['originals'], $s[$b]['originals']]);
        $this->assertTrue(Metrics::reset($a));
        $s = Metrics::snapshot();
        $this->assertSame([0, 7], [$s[$a]['originals'], $s[$b]['originals']]);
        $this->assertSame(0, $s[$a]['latency']['success']['count']);
        $this->assertFalse(Metrics::reset(Run::name('metrics-never-used')));
        try {
            Metrics::reset('');
            $this->fail('an empty name is refused');
        } catch (\ValueError $e) {
            $this->assertStringContainsString('name', $e->getMessage());
        }
    }
}
