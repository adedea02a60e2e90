<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Funnel;
use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\HttpBatch;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 2: real php-fpm (pm = static, 8 workers) behind nginx on loopback.
 * 6 concurrent requests each try to hold a lease of a funnel of limit 3 → exactly 3 hold and 3
 * get FunnelFull; CLI processes see the same counters; with reserve 1 a CLI caller gets at most
 * 2 while a web request can still take the reserved slot.
 */
final class FpmFunnelTest extends TestCase
{
    private FpmServer $fpm;

    protected function setUp(): void
    {
        $this->fpm = FpmServer::shared();
    }

    private function holdUrl(string $name, int $limit, int $reserve, string $group, string $token): string
    {
        return $this->fpm->url('/?' . http_build_query([
            'do' => 'hold', 'name' => $name, 'limit' => $limit, 'reserve' => $reserve,
            'group' => $group, 'token' => $token,
        ]));
    }

    /** @return list<string> pids (file contents) of the requests currently holding a lease of $group */
    private function holders(string $group): array
    {
        return array_map('file_get_contents', glob($this->fpm->signalDir() . "/held-$group-*") ?: []);
    }

    public function testSixConcurrentRequestsOnLimitThree(): void
    {
        $name = Run::name('fpm-x');
        $group = bin2hex(random_bytes(4));
        $urls = [];
        for ($i = 0; $i < 6; $i++) {
            $urls[$i] = $this->holdUrl($name, 3, 0, $group, "$group-$i");
        }
        $batch = new HttpBatch($urls, 30);
        $settled = $batch->tickUntil(fn () => count($this->holders($group)) === 3 && $batch->finished() === 3, 20);
        $holders = $this->holders($group);
        $finishedEarly = $batch->finished();

        // Observed while the 3 holders are still inside their requests:
        $inFlightHere = (new Funnel($name, limit: 3))->inFlight();
        $cli = $this->runJson('probe.php', ['in_flight', $name, 3]);
        $cliTry = $this->runJson('probe.php', ['try_acquire', $name, 3]);

        touch($this->fpm->signalDir() . "/release-$group");
        $results = $batch->results(30);

        $this->assertTrue($settled, "expected 3 holders and 3 finished requests, saw " . count($holders)
            . " holders and $finishedEarly finished:\n" . json_encode($results) . "\n" . $this->fpm->logs());
        $byResult = array_count_values(array_map(fn ($r) => $r['result'] ?? ('error: ' . json_encode($r)), $results));
        ksort($byResult);
        $this->assertSame(['FunnelFull' => 3, 'held' => 3], $byResult, json_encode($results));
        foreach ($results as $r) {
            $this->assertSame(200, $r['_status']);
            $this->assertSame('fpm-fcgi', $r['sapi']);
            if ($r['result'] === 'FunnelFull') {
                $this->assertSame('Resilient\\FunnelFull', $r['class']);
                $this->assertNotSame('', $r['message']);
            }
        }
        // The holders block their workers, so the refusals necessarily came from other workers
        // (a quick refusal may free its worker for a later one: 4 to 6 distinct workers in all).
        $pidsOf = fn (string $result) => array_column(array_filter($results, fn ($r) => $r['result'] === $result), 'pid');
        $this->assertCount(3, array_unique($pidsOf('held')), 'the 3 holders are 3 different FPM workers');
        $this->assertSame([], array_intersect($pidsOf('held'), $pidsOf('FunnelFull')), 'refused in workers other than the holders');

        $this->assertSame(3, $inFlightHere, 'the PHPUnit (CLI) process sees the 3 FPM leases');
        $this->assertSame(3, $cli['in_flight'], 'a fresh CLI process sees the 3 FPM leases');
        $this->assertFalse($cliTry['acquired'], 'a CLI caller cannot take a 4th slot');
        $this->assertSame(0, (new Funnel($name, limit: 3))->inFlight(), 'every FPM lease is released after its request');
    }

    public function testReserveKeepsOneSlotForWebCallers(): void
    {
        $name = Run::name('fpm-r');
        $group = bin2hex(random_bytes(4));
        $release = Run::tempDir('reserve') . '/release';

        // A CLI (background) caller asks for 5 slots of limit 3 / reserve 1: it gets 2.
        $cli = PhpProcess::script('holder.php', [$name, 3, 1, 30.0, 5, $release, 30]);
        $this->assertTrue($cli->waitForOutput(fn ($o) => str_contains($o, '"got"'), 15), 'CLI holder did not start');
        $got = json_decode($cli->stdoutSoFar(), true);

        // While it holds them, one web request takes the reserved slot and a second one is refused.
        $batch = new HttpBatch([
            'first' => $this->holdUrl($name, 3, 1, $group, "$group-1"),
        ], 30);
        $firstHolds = $batch->tickUntil(fn () => count($this->holders($group)) === 1, 15);
        // (its release file exists already, so if it wrongly got a slot it answers at once)
        $group2 = bin2hex(random_bytes(4));
        touch($this->fpm->signalDir() . "/release-$group2");
        $second = $this->fpm->getJson('/?' . http_build_query(['do' => 'hold', 'name' => $name, 'limit' => 3, 'reserve' => 1, 'group' => $group2, 'token' => "$group2-2"]));
        $inFlight = (new Funnel($name, limit: 3, reserve: 1))->inFlight();

        touch($this->fpm->signalDir() . "/release-$group");
        touch($release);
        $results = $batch->results(30);
        $r = $cli->wait(15);
        $this->assertSame(0, $r->exitCode, $r->describe());

        $this->assertSame(2, $got['got'], 'a CLI caller gets at most limit - reserve = 2 slots');
        $this->assertTrue($firstHolds, 'a web request can use the reserved slot: ' . json_encode($results));
        $this->assertSame('held', $results['first']['result'] ?? null, json_encode($results));
        $this->assertSame('FunnelFull', $second['result'] ?? null, json_encode($second));
        $this->assertSame(3, $inFlight);
        $this->assertSame(0, (new Funnel($name, limit: 3, reserve: 1))->inFlight());
    }
}
