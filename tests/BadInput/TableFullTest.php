<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 7 (table full): with resilient.shm_slots = 8, eight names fit; the ninth is a clear
 * exception saying the table is full; the names already there keep working.
 */
final class TableFullTest extends TestCase
{
    public function testNinthNameInAnEightSlotTableIsAClearError(): void
    {
        $code = <<<'PHP'
            $made = 0;
            try {
                for ($i = 0; $i < 20; $i++) {
                    (new Resilient\Funnel("table-$i", limit: 1))->inFlight();
                    $made++;
                }
            } catch (Throwable $e) {
                $again = (new Resilient\Funnel("table-0", limit: 1))->tryAcquire() !== null;
                $budgetToo = null;
                try { new Resilient\RetryBudget("another-name"); } catch (Throwable $b) { $budgetToo = get_class($b); }
                throw new RuntimeException(json_encode(['made' => $made, 'class' => get_class($e), 'message' => $e->getMessage(),
                    'first_name_still_works' => $again, 'budget_too' => $budgetToo]));
            }
            return $made;
            PHP;
        $path = Run::shmPath('full-' . bin2hex(random_bytes(3)));
        $r = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => $path, 'resilient.shm_slots' => 8], 20);
        $this->assertSame(0, $r->exitCode, "the child must not crash:\n" . $r->describe());
        $outer = $r->json();
        $this->assertTrue($outer['threw'], '20 names fit in an 8-slot table: ' . json_encode($outer));
        $info = json_decode($outer['message'], true);
        fwrite(STDERR, "\n[table full] after {$info['made']} names: {$info['class']}: {$info['message']}\n");
        $this->assertSame(8, $info['made'], 'an 8-slot table holds 8 names');
        $this->assertTrue(is_a($info['class'], \RuntimeException::class, true), $info['class']);
        $this->assertMatchesRegularExpression('/full/i', $info['message']);
        $this->assertTrue($info['first_name_still_works']);
        $this->assertNotNull($info['budget_too'], 'a new budget name must also be refused when the table is full');
    }

    /**
     * A client whose name still fits but whose retry budget's entry does not is refused, and
     * the name it claimed on the way stays out of `Metrics::snapshot()` (it would show a row of
     * zeros for an upstream nobody could call).
     */
    public function testAClientRefusedForAFullTableIsNotListedInMetrics(): void
    {
        $code = <<<'PHP'
            for ($i = 0; $i < 7; $i++) {
                (new Resilient\Funnel("table-$i", limit: 1))->inFlight();
            }
            try {
                new Resilient\Client('half-made', ['base_url' => 'http://127.0.0.1:9']);
                return ['made' => true];
            } catch (Resilient\SharedMemoryError $e) {
                return ['made' => false, 'message' => $e->getMessage(),
                    'listed' => array_keys(Resilient\Metrics::snapshot())];
            }
            PHP;
        $path = Run::shmPath('half-' . bin2hex(random_bytes(3)));
        $r = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => $path, 'resilient.shm_slots' => 8], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json()['returned'];
        $this->assertFalse($out['made'], 'the name takes the 8th entry, its budget finds none: ' . json_encode($out));
        $this->assertMatchesRegularExpression('/full/i', $out['message']);
        $this->assertNotContains('half-made', $out['listed']);
    }

    /**
     * A client with no funnel, budget or breaker still works when the table is full, but its
     * metrics cannot be kept: PHP's error log says so, once per process, rather than leaving a
     * dashboard to miss the upstream without a word.
     */
    public function testAClientWhoseMetricsDoNotFitSaysSoOnceInTheErrorLog(): void
    {
        $code = <<<'PHP'
            for ($i = 0; $i < 8; $i++) {
                (new Resilient\Funnel("table-$i", limit: 1))->inFlight();
            }
            foreach (['quiet-a', 'quiet-b'] as $name) {
                new Resilient\Client($name, ['base_url' => 'http://127.0.0.1:9', 'budget' => false]);
            }
            return array_keys(Resilient\Metrics::snapshot());
            PHP;
        // The path's own text must not contain the names looked for in the log.
        $path = Run::shmPath('metrics-full-' . bin2hex(random_bytes(3)));
        $r = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => $path, 'resilient.shm_slots' => 8], 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame([], $r->json()['returned'], 'no client of the full table has metrics');
        $said = preg_match_all('/resilient: metrics of upstream \'quiet-a\' are not recorded: .*full/', $r->stderr);
        $this->assertSame(1, $said, "said once, for the first name:\n" . $r->stderr);
        $this->assertStringNotContainsString("'quiet-b'", $r->stderr);
    }
}
