<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\RetryBudget;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 4: 100 originals recorded by 4 processes, then retries asked by 4 processes:
 * exactly floor + 10 succeed (ratio 0.1, floor 5 → 15), the rest are refused; after the
 * (small) window slides, retries are allowed again.
 */
final class BudgetAcrossProcessesTest extends TestCase
{
    // Wide enough that spawning the worker processes on a loaded CI machine cannot push the
    // originals out of the window before the retries are asked (the slide costs one window).
    private const WINDOW = 5.0;

    public function testFloorPlusTenPercentAcrossProcessesThenTheWindowSlides(): void
    {
        $name = Run::name('budget');
        $cfg = [0.1, 5, self::WINDOW];

        // Phase 1: 4 processes × 25 originals, started together.
        $start = microtime(true) + 0.3;
        $procs = [];
        for ($i = 0; $i < 4; $i++) {
            $procs[] = PhpProcess::script('budget_worker.php', [$name, ...$cfg, 25, 0, $start]);
        }
        foreach ($procs as $p) {
            $r = $p->wait(30);
            $this->assertSame(0, $r->exitCode, $r->describe());
        }

        // Phase 2: 4 processes × 10 retries each, started together.
        $start = microtime(true) + 0.3;
        $procs = [];
        for ($i = 0; $i < 4; $i++) {
            $procs[] = PhpProcess::script('budget_worker.php', [$name, ...$cfg, 0, 10, $start]);
        }
        $granted = 0;
        foreach ($procs as $p) {
            $r = $p->wait(30);
            $this->assertSame(0, $r->exitCode, $r->describe());
            $granted += $r->json()['granted'];
        }
        $spentAt = microtime(true);
        fwrite(STDERR, "\n[budget] 100 originals, 40 retries asked by 4 processes: $granted granted\n");
        $this->assertSame(15, $granted, 'floor 5 + 10% of 100 originals = 15 retries, no more, no less');

        // This process shares the budget: refused now...
        $budget = new RetryBudget($name, ratio: 0.1, floor: 5, window: self::WINDOW);
        $this->assertFalse($budget->tryConsume(), 'a 16th retry inside the window must be refused');

        // ...and allowed again once the window has slid past the spent retries. The slide is
        // judged by the last refusal (the clock read before the call), not by when the grant
        // was seen: a machine paused in between (a VM snapshot stalled one CI run for 6 s)
        // delays the grant, not the refusals.
        $lastRefused = $spentAt;
        $probe = function () use ($budget, &$lastRefused): bool {
            $asked = microtime(true);
            $granted = $budget->tryConsume();
            if (!$granted) {
                $lastRefused = $asked;
            }
            return $granted;
        };
        $this->waitFor($probe, 3 * self::WINDOW, 'a retry to be allowed after the window slides', 0.05);
        $sinceSpent = microtime(true) - $spentAt;
        fwrite(STDERR, sprintf(
            "[budget] retries allowed again %.2f s after they were spent, last refused after %.2f s (window %.1f s)\n",
            $sinceSpent,
            $lastRefused - $spentAt,
            self::WINDOW,
        ));
        $this->assertGreaterThan(0.5 * self::WINDOW, $sinceSpent, 'retries came back long before the window slid');
        $this->assertLessThan(1.5 * self::WINDOW + 0.5, $lastRefused - $spentAt, 'a retry refused long after the window slid');
    }

    /**
     * 16 processes asking for retries without pause for 3 s, one retry per 0.2 s window (floor
     * 1): they got about twice that when their clocks straddled bucket boundaries. The window
     * slides by buckets of 10 ms, so at most one retry per 190 ms: 16 + 1 in 3 s. Every worker
     * stops at the same moment, start + 3 s, however late the machine started it.
     */
    public function testSixteenProcessesSpinningOnOneRetryPerWindowGetNoMore(): void
    {
        $name = Run::name('budget-spin');
        $start = microtime(true) + 0.5;
        $procs = [];
        for ($i = 0; $i < 16; $i++) {
            $procs[] = PhpProcess::script('budget_worker.php', [$name, 0.0, 1, 0.2, 0, 0, $start, 3.0]);
        }
        $granted = 0;
        $first = INF;
        $last = -INF;
        foreach ($procs as $p) {
            $r = $p->wait(60);
            $this->assertSame(0, $r->exitCode, $r->describe());
            $report = $r->json();
            $granted += $report['granted'];
            if ($report['granted'] > 0) {
                $first = min($first, $report['first_grant']);
                $last = max($last, $report['last_grant']);
            }
        }
        fwrite(STDERR, sprintf(
            "\n[budget] 16 processes spinning 3 s on 1 retry per 0.2 s: %d granted, first to last %.2f s\n",
            $granted,
            $last - $first,
        ));
        // At most one retry per 190 ms over the span the grants took (which covers them all):
        // 17 in 3 s. Judged on the span seen rather than the 3 s asked, a worker the machine
        // stopped between its clock check and its call cannot fail the test.
        $this->assertLessThanOrEqual(1 + (int) ceil(($last - $first) / 0.19), $granted, sprintf('%d granted over %.2f s', $granted, $last - $first));
        $this->assertGreaterThanOrEqual(8, $granted, 'the budget was spent, window after window');
    }

    public function testOneProcessStats(): void
    {
        $b = new RetryBudget(Run::name('stats'), ratio: 0.5, floor: 1, window: 60.0);
        for ($i = 0; $i < 4; $i++) {
            $b->recordOriginal();
        }
        $ok = 0;
        for ($i = 0; $i < 10; $i++) {
            $ok += $b->tryConsume() ? 1 : 0;
        }
        $this->assertSame(3, $ok, 'floor 1 + 0.5 × 4 originals');
        $stats = $b->stats();
        $this->assertSame(4, $stats['originals']);
        $this->assertSame(3, $stats['retries'], 'only the granted ones count');
        $this->assertEqualsWithDelta(3.0, $stats['allowed'], 1e-9, 'floor 1 + 0.5 × 4');
        $this->assertEqualsWithDelta(0.0, $stats['remaining'], 1e-9);
        $this->assertSame([60.0, 0.5, 1, false], [$stats['window'], $stats['ratio'], $stats['floor'], $stats['degraded']]);
    }
}
