<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\HttpBatch;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * One learned limit (`'limit' => 'auto'`) shared by 8 php-fpm workers
 * (behind nginx) and 8 CLI processes calling the same upstream at once. The mock upstream is the
 * independent observer: it records how many of the name's requests were in flight when each
 * arrived. This process samples the shared learned limit (`Funnel::stats()`) every few ms.
 *
 * The bound (docs/adaptive-limit.md): leases are never revoked, and each lease was counted while
 * fewer than the cap its acquirer read were in flight; so the upstream never sees more than the
 * highest learned cap in force during the life of the oldest attempt still running, i.e. within
 * the longest attempt's duration before the arrival. The upstream answers 40 ms, then a burst
 * of 503s, then 40 ms again: the limit must fall under the 503s and rise back.
 */
final class SharedLimitTest extends TestCase
{
    private const CALLS_EACH = 60;
    private const PROCESSES = 16; // 8 FPM requests + 8 CLI processes

    public function testEveryProcessObeysTheOneLearnedLimit(): void
    {
        $up = MockUpstream::shared();
        $fpm = FpmServer::shared();
        $name = Run::name('adaptive');
        $key = $up->key('adaptive');
        $steps = array_merge(
            array_fill(0, 250, ['delay_ms' => 40]),
            array_fill(0, 400, ['status' => 503, 'delay_ms' => 40]),
            [['delay_ms' => 40]],
        );
        $up->script($key, $steps);
        $spec = [
            'name' => $name,
            'options' => [
                'base_url' => $up->base($key),
                'max_attempts' => 1,
                'timeout' => 2.0,
                'budget' => false,
                'funnel' => ['limit' => 'auto', 'min' => 1, 'max' => 16, 'initial' => 2, 'wait' => 3.0],
            ],
            'path' => '/x',
            'calls' => self::CALLS_EACH,
        ];
        $arg = base64_encode(json_encode($spec));
        $watch = new Funnel($name, 16);
        $samples = [[microtime(true) * 1000, 2.0]];

        $urls = [];
        for ($i = 0; $i < 8; $i++) {
            $urls[$i] = $fpm->url('/?' . http_build_query(['do' => 'call', 'spec' => $arg]));
        }
        $batch = new HttpBatch($urls, 120);
        $cli = [];
        for ($i = 0; $i < 8; $i++) {
            $cli[] = PhpProcess::script(dirname(__DIR__) . '/Http/fixtures/call.php', [$arg]);
        }
        $end = microtime(true) + 120;
        while (microtime(true) < $end) {
            $batch->tick(0.002);
            $learned = $watch->stats()['learned'];
            if ($learned !== null) {
                $samples[] = [microtime(true) * 1000, (float) $learned['limit']];
            }
            $running = array_filter($cli, fn (PhpProcess $p) => $p->isRunning());
            if ($batch->finished() === 8 && $running === []) {
                break;
            }
        }
        $web = $batch->results(5);
        $results = [];
        foreach ($web as $r) {
            $this->assertSame('fpm-fcgi', $r['sapi'] ?? null, json_encode($r));
            $results = array_merge($results, $r['results']);
        }
        foreach ($cli as $p) {
            $out = $p->wait(30)->json();
            $this->assertSame('cli', $out['sapi']);
            $results = array_merge($results, $out['results']);
        }
        $this->assertCount(self::PROCESSES * self::CALLS_EACH, $results);

        $attempts = $up->attempts($key, 1);
        $longest = max(array_map(fn ($a) => ($a['duration_ms'] ?? 0.0), $attempts));
        // + the client's own work around the request, on a machine as loaded as 16 callers make it
        $window = $longest + 150.0;
        $over = 0;
        $worst = null;
        foreach ($attempts as $a) {
            $t = $a['unix_ms'];
            $cap = 0;
            $now = 2;
            $opening = 2; // the cap in force when the window opened: the last sample before it
            foreach ($samples as [$at, $limit]) {
                if ($at <= $t) {
                    $now = (int) floor($limit);
                }
                if ($at < $t - $window) {
                    $opening = (int) floor($limit);
                }
                if ($at >= $t - $window && $at <= $t + 5.0) {
                    $cap = max($cap, (int) floor($limit));
                }
            }
            $cap = max($cap, $now, $opening);
            $c = $a['concurrent_at_arrival'];
            if ($c > $now) {
                $over++;
            }
            $this->assertLessThanOrEqual(
                $cap,
                $c,
                sprintf('%d in flight at the upstream at %.1f, the highest cap in force in the %.0f ms before was %d', $c, $t, $window, $cap),
            );
            if ($worst === null || $c - $now > $worst) {
                $worst = $c - $now;
            }
        }
        $limits = array_column($samples, 1);
        $peak = max($limits);
        $firstDrop = null;
        foreach ($attempts as $i => $a) {
            if (($a['status'] ?? null) === 503) {
                $firstDrop = $a['unix_ms'];
                break;
            }
        }
        $this->assertNotNull($firstDrop, 'the 503 burst was reached');
        $before = array_filter($samples, fn ($s) => $s[0] < $firstDrop);
        $after = array_filter($samples, fn ($s) => $s[0] >= $firstDrop);
        $beforePeak = max(array_column($before, 1));
        $trough = min(array_column($after, 1));
        $troughAt = null;
        foreach ($after as [$at, $limit]) {
            if ($limit === $trough) {
                $troughAt = $at;
                break;
            }
        }
        $recovered = max(array_column(array_filter($after, fn ($s) => $s[0] > $troughAt), 1) ?: [0.0]);
        fwrite(STDERR, sprintf(
            "\n[adaptive] %d attempts, %d samples; limit: peak %.2f before the 503s, trough %.2f, back to %.2f; "
            . "max concurrency %d; arrivals over the current cap: %d (worst by %d), never over the highest cap of the last %.0f ms\n",
            count($attempts), count($samples), $beforePeak, $trough, $recovered,
            max(array_column($attempts, 'concurrent_at_arrival')), $over, $worst, $window,
        ));
        $this->assertGreaterThanOrEqual(4.0, $beforePeak, 'the limit grew from 2 while answers came at 40 ms');
        $this->assertLessThanOrEqual(1.5, $trough, 'the 503s drove the limit to its floor');
        $this->assertGreaterThanOrEqual(4.0, $recovered, 'and it rose back once the answers were good again');
    }
}
