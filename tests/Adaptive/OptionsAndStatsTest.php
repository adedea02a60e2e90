<?php

declare(strict_types=1);

namespace Resilient\Tests\Adaptive;

require_once __DIR__ . '/../Http/support/MockUpstream.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\Metrics;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * `'funnel' => ['limit' => 'auto', 'min', 'max', 'initial']`: wrong types and values throw what
 * the other options throw (tests/Http/OptionTypesTest.php), and what the limit learned shows in
 * `Funnel::stats()`, `Metrics::snapshot()` and `Metrics::prometheus()`.
 */
final class OptionsAndStatsTest extends TestCase
{
    /** @return array<string, array{array<string,mixed>, class-string, string}> */
    public static function badOptions(): array
    {
        return [
            'max above 64' => [['limit' => 'auto', 'max' => 65], \ValueError::class, "option 'funnel.max': must be between min (1) and 64, got 65"],
            'min of 0' => [['limit' => 'auto', 'min' => 0], \ValueError::class, "option 'funnel.min': must be between 1 and 64, got 0"],
            'initial over max' => [['limit' => 'auto', 'max' => 8, 'initial' => 9], \ValueError::class, "option 'funnel.initial': must be between min (1) and max (8), got 9"],
            'max under min' => [['limit' => 'auto', 'min' => 4, 'max' => 2], \ValueError::class, "option 'funnel.max': must be between min (4) and 64, got 2"],
            'min as text' => [['limit' => 'auto', 'min' => 'one'], \TypeError::class, "option 'funnel.min' must be of type int, string given"],
            // Every value out of range gets the range it has, not "must not be negative" or "at most 4294967295".
            'negative max' => [['limit' => 'auto', 'max' => -1], \ValueError::class, "option 'funnel.max': must be between min (1) and 64, got -1"],
            'negative min' => [['limit' => 'auto', 'min' => -1], \ValueError::class, "option 'funnel.min': must be between 1 and 64, got -1"],
            'huge min' => [['limit' => 'auto', 'min' => 2 ** 40], \ValueError::class, "option 'funnel.min': must be between 1 and 64, got 1099511627776"],
            'huge initial' => [['limit' => 'auto', 'initial' => PHP_INT_MAX], \ValueError::class, "option 'funnel.initial': must be between min (1) and max (64), got " . PHP_INT_MAX],
            'another word' => [['limit' => 'automatic'], \TypeError::class, "option 'funnel.limit' must be of type int or 'auto', string given"],
            'bounds with a fixed limit' => [['limit' => 4, 'max' => 8], \ValueError::class, "option 'funnel.max': only with 'limit' => 'auto'"],
            'reserve not under max' => [['limit' => 'auto', 'max' => 4, 'reserve' => 4], \ValueError::class, "option 'funnel.reserve': must be between 0 and limit - 1 (3), got 4"],
        ];
    }

    /** @dataProvider badOptions */
    public function testBadBoundsThrowLikeOtherOptions(array $funnel, string $class, string $message): void
    {
        try {
            new Client(Run::name('ao'), ['funnel' => $funnel]);
            $this->fail('expected ' . $class);
        } catch (\Throwable $e) {
            $this->assertInstanceOf($class, $e, $e->getMessage());
            $this->assertStringStartsWith($message, $e->getMessage());
        }
    }

    public function testDefaultsAndNumericStringsAreAccepted(): void
    {
        $name = Run::name('ao-ok');
        new Client($name, ['funnel' => ['limit' => 'auto']]);
        new Client($name, ['funnel' => ['limit' => 'AUTO']]); // as a `.env` may spell it
        new Client($name, ['funnel' => ['limit' => 'auto', 'min' => '2', 'max' => 8.0, 'initial' => 3, 'reserve' => 1]]);
        $this->assertNull((new Funnel($name, 8))->stats()['learned'], 'nothing learned before an attempt');
    }

    public function testWhatWasLearnedIsVisible(): void
    {
        $up = MockUpstream::shared();
        $key = $up->key('ao-stats');
        $up->script($key, [['delay_ms' => 20]]);
        $name = Run::name('ao-stats');
        $client = new Client($name, [
            'base_url' => $up->base($key),
            'funnel' => ['limit' => 'auto', 'initial' => 3, 'max' => 10],
        ]);
        for ($i = 0; $i < 12; $i++) {
            $client->get('/x');
        }
        $stats = (new Funnel($name, 10))->stats();
        $learned = $stats['learned'];
        $this->assertIsArray($learned);
        $this->assertSame(['limit', 'no_load_rtt_ms', 'rtt_ms', 'intervals'], array_keys($learned));
        $this->assertGreaterThanOrEqual(1, $learned['intervals'], json_encode($stats));
        $this->assertGreaterThanOrEqual(19.0, $learned['rtt_ms'], 'the upstream answers in 20 ms');
        $this->assertLessThan(200.0, $learned['rtt_ms']);
        $this->assertGreaterThanOrEqual(19.0, $learned['no_load_rtt_ms']);
        $this->assertGreaterThanOrEqual(1.0, $learned['limit']);
        $this->assertLessThanOrEqual(10.0, $learned['limit']);

        $snapshot = Metrics::snapshot()[$name];
        $this->assertSame($learned['intervals'], $snapshot['learned']['intervals']);
        $this->assertEqualsWithDelta($learned['rtt_ms'], $snapshot['learned']['rtt_ms'], 50.0);
        $text = Metrics::prometheus();
        $this->assertMatchesRegularExpression('/^resilient_funnel_learned_limit\{upstream="' . preg_quote($name, '/') . '"\} [0-9.]+$/m', $text);
        $this->assertMatchesRegularExpression('/^resilient_funnel_no_load_rtt_seconds\{upstream="' . preg_quote($name, '/') . '"\} 0\.0[0-9]+$/m', $text);
        $this->assertStringContainsString('# TYPE resilient_funnel_rtt_seconds gauge', $text);
    }
}
