<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

use Resilient\Client;
use Resilient\Funnel;
use Resilient\FunnelFull;
use Resilient\Metrics;
use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * `Metrics::snapshot()` builds its arrays with keys made once (permanent interned strings made at
 * MINIT; strings made per call when the extension starts after PHP's startup), makes each array
 * as a copy of one laid out per shape (copied by `memcpy` when its keys are permanent) with its
 * values written in place, and shares the arrays every calm name has alike (no refusal, no failure, no latency, a breaker that never
 * moved). Neither may show: each name reads its own counters, a change to one name's array
 * leaves the others alone, and the array is the same under FPM with a late start, under opcache
 * and in the CLI.
 */
final class SnapshotArrayTest extends TestCase
{
    /** The entry of a name that recorded 3 calls of one 3 ms attempt each. */
    private static function threeCallsOf3ms(): array
    {
        $zero = ['1' => 0, '2' => 0, '5' => 0, '10' => 0, '25' => 0, '50' => 0, '100' => 0, '250' => 0, '500' => 0,
            '1000' => 0, '2500' => 0, '5000' => 0, '10000' => 0, '+Inf' => 0];
        $success = ['1' => 0, '2' => 0] + array_fill_keys([5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, '+Inf'], 3);
        return [
            'originals' => 3, 'attempts' => 3, 'retries' => 0, 'retries_succeeded' => 0, 'retries_denied' => 0,
            'successes' => 3, 'in_flight' => 0, 'fallbacks' => 0, 'backend_fallbacks' => 0,
            'shed' => ['funnel' => 0, 'budget' => 0, 'deadline' => 0, 'circuit' => 0],
            'failures' => ['4xx' => 0, '5xx' => 0, 'timeout' => 0, 'connection' => 0, 'other' => 0],
            'latency' => [
                'success' => ['buckets' => $success, 'sum' => 0.009, 'count' => 3],
                'failure' => ['buckets' => $zero, 'sum' => 0.0, 'count' => 0],
            ],
            'breaker' => ['state' => 'closed', 'transitions' => ['closed' => 0, 'open' => 0, 'half_open' => 0]],
            'learned' => null,
            'funnel_in_flight' => null,
            'funnel_limit' => null,
        ];
    }

    public function testEachNameReadsItsOwnCountersAndAChangeToOneLeavesTheOthersAlone(): void
    {
        [$a, $b, $busy] = [Run::name('snap-a'), Run::name('snap-b'), Run::name('snap-busy')];
        Metrics::recordSynthetic($a, 3, 0.003);
        Metrics::recordSynthetic($b, 3, 0.003);
        // One refusal by the funnel (nothing sent: the one slot is held here).
        $lease = (new Funnel($busy, 1))->tryAcquire();
        $this->assertNotNull($lease);
        $client = new Client($busy, ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 1]]);
        try {
            $client->get('/');
            $this->fail('the funnel is full');
        } catch (FunnelFull) {
        }
        $lease->release();
        $numeric = (string) random_int(100000, 999999);
        Metrics::recordSynthetic($numeric, 1, 0.0005);

        $s = Metrics::snapshot();
        $this->assertSame(self::threeCallsOf3ms(), $s[$a]);
        $this->assertSame(self::threeCallsOf3ms(), $s[$b]);
        $this->assertSame(['funnel' => 1, 'budget' => 0, 'deadline' => 0, 'circuit' => 0], $s[$busy]['shed']);
        $this->assertSame(1, $s[$busy]['originals']);
        $this->assertSame(0, $s[$busy]['attempts']);
        $this->assertSame(0, $s[$busy]['latency']['success']['count']);
        $this->assertSame(1, $s[(int) $numeric]['latency']['success']['buckets'][1], 'a numeric name is an integer key, as PHP makes it');
        $this->assertTrue(Metrics::reset((int) $numeric), 'the key snapshot() gives is a name reset() takes');
        $this->assertSame(0, Metrics::snapshot()[(int) $numeric]['originals']);

        $s[$a]['shed']['budget'] = 7;
        $s[$a]['latency']['failure']['buckets']['+Inf'] = 7;
        $s[$a]['breaker']['transitions']['open'] = 7;
        $this->assertSame(self::threeCallsOf3ms(), $s[$b], 'the arrays calm names share are copied on write');
        $this->assertSame(0, $s[$busy]['latency']['failure']['buckets']['+Inf']);
        $this->assertSame(self::threeCallsOf3ms(), Metrics::snapshot()[$a]);
    }

    /**
     * The arrays are copies of a shape whose values are written in place, keeping each slot's
     * link in its hash chain; `===` walks both arrays in order and would not notice a broken chain, so every key of every
     * level is looked up here, as user code does.
     */
    public function testEveryKeyOfEveryLevelIsFoundByLookup(): void
    {
        $name = Run::name('snap-lookup');
        Metrics::recordSynthetic($name, 3, 0.003);
        $entry = Metrics::snapshot()[$name];
        $this->assertLookups(self::threeCallsOf3ms(), $entry, $name);
        $this->assertFalse(isset($entry['latency']['success']['buckets'][3]), 'no bound of 3 ms');
        $this->assertArrayNotHasKey('nope', $entry);

        $buckets = $entry['latency']['success']['buckets'];
        $buckets[] = 99;
        $this->assertSame(99, $buckets[10001], 'the next integer key follows the largest bound');
        unset($buckets[1000]);
        $this->assertArrayNotHasKey(1000, $buckets);
        $this->assertSame(3, $buckets[2500]);
        $entry['originals'] = 4;
        $entry['added'] = true;
        $this->assertSame(4, $entry['originals']);
        $this->assertTrue($entry['added']);
    }

    private function assertLookups(array $expected, array $actual, string $path): void
    {
        $this->assertCount(count($expected), $actual, $path);
        foreach ($expected as $key => $value) {
            $this->assertArrayHasKey($key, $actual, "$path.$key");
            $this->assertTrue(isset($actual[$key]) || $value === null, "$path.$key");
            if (is_array($value)) {
                $this->assertLookups($value, $actual[$key], "$path.$key");
            } else {
                $this->assertSame($value, $actual[$key], "$path.$key");
            }
        }
    }

    public function testRepeatedSnapshotsKeepNoMemory(): void
    {
        for ($i = 0; $i < 20; $i++) {
            Metrics::recordSynthetic(Run::name('snap-mem'), 2, 0.02);
        }
        $x = Metrics::snapshot();
        $before = memory_get_usage();
        for ($i = 0; $i < 2000; $i++) {
            $x = Metrics::snapshot();
        }
        $this->assertSame($before, memory_get_usage());
    }

    /**
     * A shared array is counted once per name that holds it: one count short and freeing the
     * snapshot frees it while a copy kept elsewhere still points to it (a use after free that a
     * test run would not reliably show otherwise); one too many and it leaks.
     */
    public function testASharedArrayIsCountedOncePerNameThatHoldsIt(): void
    {
        [$a, $b] = [Run::name('snap-rc-a'), Run::name('snap-rc-b')];
        Metrics::recordSynthetic($a, 1, 0.003);
        Metrics::recordSynthetic($b, 1, 0.003);
        // What refcount() adds to the holders' count, measured on an array held once.
        $probe = [random_int(1, 9)];
        $extra = self::refcount($probe) - 1;
        // Each array and the places where a name can hold it (a calm histogram serves both).
        $places = ['shed' => [['shed']], 'failures' => [['failures']],
            'histogram' => [['latency', 'failure'], ['latency', 'success']], 'breaker' => [['breaker']]];
        foreach ($places as $label => $paths) {
            $at = static function (array $entry, array $path): array {
                foreach ($path as $key) {
                    $entry = $entry[$key];
                }
                return $entry;
            };
            $holders = static function (array $s, array $calm) use ($at, $paths): int {
                $n = 0;
                foreach ($s as $entry) {
                    foreach ($paths as $path) {
                        $n += (int) ($at($entry, $path) === $calm);
                    }
                }
                return $n;
            };
            $s = Metrics::snapshot();
            $n = $holders($s, $at($s[$a], $paths[0]));
            $this->assertGreaterThanOrEqual(2, $n, "$label: $a and $b hold the calm array");
            $this->assertSame($n + $extra, self::refcount($at($s[$a], $paths[0])), "$label: one count per holder");
            unset($s[$b]);
            $this->assertSame($holders($s, $at($s[$a], $paths[0])) + $extra, self::refcount($at($s[$a], $paths[0])), "$label: less without $b");
        }
        $kept = $s[$a]['breaker'];
        unset($s);
        $this->assertSame(1 + $extra, self::refcount($kept), 'the kept array outlives the snapshot, counted once');
        $this->assertSame('closed', $kept['state']);
    }

    /** The reference count debug_zval_dump() shows for $value (its own arguments included). */
    private static function refcount(array $value): int
    {
        ob_start();
        debug_zval_dump($value);
        $dump = (string) ob_get_clean();
        self::assertSame(1, preg_match('/^array\(\d+\) refcount\((\d+)\)/', $dump, $m), $dump);
        return (int) $m[1];
    }

    public function testTheArrayIsTheSameUnderOpcacheAndWhenAnFpmPoolStartsTheExtensionItself(): void
    {
        $name = Run::name('snap-modes');
        Metrics::recordSynthetic($name, 3, 0.003);
        $fixture = __DIR__ . '/fixtures/snapshot_entry.php';
        $shm = (string) ini_get('resilient.shm_path');

        $p = PhpProcess::script($fixture, [$name], ['zend_extension' => 'opcache', 'opcache.enable_cli' => '1'])->wait(10.0);
        $this->assertSame(0, $p->exitCode, $p->describe());
        $this->assertSame(json_encode(self::threeCallsOf3ms()), $p->stdout, 'CLI with opcache');

        $dir = Run::tempDir('snap-late');
        $fpm = FpmMaster::start($dir, [
            'late' => ['workers' => 1, 'ini' => ['resilient.shm_path' => $shm, 'extension' => Run::extension()]],
        ], Run::shmPath('snap-late-master'), extensionInMaster: false);
        try {
            $this->waitFor(fn () => file_exists("$dir/late.sock") ?: null, 15.0, 'the pool socket');
            // Two requests: keys made for one call must not outlive it, nor be missed by the next.
            for ($i = 0; $i < 2; $i++) {
                $body = Fcgi::get("$dir/late.sock", $fixture, ['name' => $name]);
                $this->assertSame(json_encode(self::threeCallsOf3ms()), $body, "FPM, late start, request $i");
            }
        } finally {
            $fpm->stop();
        }
    }

    /**
     * Reading the metrics creates nothing: before any process used resilient there are none, and
     * a segment file made by the reader's user (root in a cron job or tinker, at a
     * `resilient.shm_path` php-fpm shares) would lock the FPM workers out of it.
     */
    public function testReadingBeforeAnyProcessMadeTheSegmentCreatesNoFile(): void
    {
        $path = Run::tempDir('snapshot') . '/not-yet.shm';
        $r = PhpProcess::runCode(
            'var_export(Resilient\\Metrics::snapshot()); echo "|"; echo Resilient\\Metrics::prometheus();',
            ['resilient.shm_path' => $path],
        );
        $this->assertSame(0, $r->exitCode, $r->describe());
        [$snapshot, $prometheus] = explode('|', $r->stdout, 2);
        $this->assertSame('array (' . "\n" . ')', $snapshot);
        $this->assertStringNotContainsString('upstream=', $prometheus);
        $this->assertFileDoesNotExist($path, 'reading the metrics created the segment');
    }

    /**
     * A process that has the segment open skips the file check for a second, but only for the
     * segment open() would use as it is: after the file was removed and `shm_slots` changed,
     * the next snapshot finds no file and makes none (it made one as the reader's user).
     */
    public function testASnapshotAfterTheFileWentAndTheSettingsChangedCreatesNoFile(): void
    {
        $path = Run::tempDir('snapshot-gone') . '/gone.shm';
        $r = PhpProcess::runCode(
            '(new Resilient\\Funnel("gone", 2))->tryAcquire()?->release();'
            . ' Resilient\\Metrics::snapshot(); unlink(ini_get("resilient.shm_path"));'
            . ' ini_set("resilient.shm_slots", "512"); var_export(Resilient\\Metrics::snapshot());'
            . ' echo "|", var_export(file_exists(ini_get("resilient.shm_path")), true);',
            ['resilient.shm_path' => $path],
        );
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame("array (\n)|false", $r->stdout);
    }
}
