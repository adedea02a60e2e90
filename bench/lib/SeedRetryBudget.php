<?php

declare(strict_types=1);

namespace ResilientBench;

use Illuminate\Support\Facades\Cache;

/**
 * The retry budget of seed 000 ("RetryBudget" in the article), verbatim apart from the
 * namespace: counters in Laravel's Cache (here the redis store) under a per-minute key.
 * It is what the extension's RetryBudget replaces; the benchmark and the lab's Laravel variant
 * run it as the article wrote it.
 */
final class SeedRetryBudget
{
    public function __construct(
        private string $name,
        private float $ratio = 0.1,
        private int $floor = 5,
    ) {}

    public function recordOriginal(): void
    {
        Cache::add($this->key('original'), 0, 120);
        Cache::increment($this->key('original'));
    }

    public function tryConsume(): bool
    {
        Cache::add($this->key('retry'), 0, 120);
        $retries = Cache::increment($this->key('retry'));
        $originals = (int) Cache::get($this->key('original'), 0);

        return $retries <= $this->floor + $originals * $this->ratio;
    }

    private function key(string $type): string
    {
        return "retry-budget:{$this->name}:{$type}:".now()->format('YmdHi');
    }
}
