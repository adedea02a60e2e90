<?php
declare(strict_types=1);

namespace App\Support;

use Illuminate\Support\Carbon;
use Illuminate\Support\Facades\Cache;

/**
 * Seed 000's cache-based retry budget, unchanged except `now()` (a Foundation helper that needs
 * the full app) spelled as Carbon::now(): a per-minute window, `floor` retries always allowed plus
 * `ratio` per original in that minute. Redis round trips: two per recordOriginal() (add, increment)
 * and three per tryConsume() (add, increment, get).
 */
final class RetryBudget
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
        return "retry-budget:{$this->name}:{$type}:".Carbon::now()->format('YmdHi');
    }
}
