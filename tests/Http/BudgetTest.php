<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * Must show 7: with the upstream failing every attempt, 100 originals produce at most
 * 100 + floor + 10 upstream attempts: the retry budget (ratio 0.1, floor 5) is shared by every
 * process on the host, here two CLI workers of 50 calls each, running at the same time; a
 * third process that comes later is refused its first retry, and told why in numbers.
 */
final class BudgetTest extends HttpTestCase
{
    public function testTheSharedBudgetBoundsAttemptsAcrossProcesses(): void
    {
        $name = Run::name('budget');
        $key = $this->up->key('budget');
        $this->up->script($key, [['status' => 503]]);
        $spec = [
            'name' => $name,
            'options' => [
                'base_url' => $this->up->base($key),
                'max_attempts' => 3,
                'backoff' => ['base' => 0.001, 'cap' => 0.002],
                'budget' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60],
            ],
            'path' => '/x',
            'calls' => 50,
        ];
        $arg = base64_encode(json_encode($spec));
        $workers = [PhpProcess::script(__DIR__ . '/fixtures/call.php', [$arg]), PhpProcess::script(__DIR__ . '/fixtures/call.php', [$arg])];
        $classes = [];
        foreach ($workers as $w) {
            foreach ($w->wait(60.0)->json()['results'] as $r) {
                $classes[] = $r['class'];
            }
        }
        $this->assertCount(100, $classes);
        $attempts = count($this->up->attempts($key, 100));
        $this->assertLessThanOrEqual(100 + 5 + 10, $attempts);
        $this->assertGreaterThanOrEqual(100 + 5, $attempts, 'the floor is always allowed');
        $counts = array_count_values($classes);
        $this->assertGreaterThanOrEqual(85, $counts['Resilient\\BudgetExhausted'] ?? 0, json_encode($counts));
        $this->assertSame(100, ($counts['Resilient\\BudgetExhausted'] ?? 0) + ($counts['Resilient\\UpstreamFailed'] ?? 0));
        // A process that comes later (a cron run, a fresh CLI) makes its first retry against a
        // budget the others spent: its message says so, with the numbers.
        $later = PhpProcess::script(__DIR__ . '/fixtures/call.php', [base64_encode(json_encode(['calls' => 1] + $spec))])->wait(20.0)->json()['results'][0];
        $this->assertSame('Resilient\\BudgetExhausted', $later['class'], json_encode($later));
        $this->assertMatchesRegularExpression('/retry budget exhausted: a retry would make 16 in the last 60s, over the 15\\.1 allowed \\(floor 5 \\+ ratio 0\\.1 × 101 originals\\), counted by every process of this host/', $later['message']);
        // Without a budget the same load would have sent 300 attempts.
        fwrite(STDERR, sprintf("\n[budget] 100 originals -> %d upstream attempts (%s)\n", $attempts, json_encode($counts)));
    }
}
