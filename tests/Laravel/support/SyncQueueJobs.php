<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

use Illuminate\Bus\Queueable;
use Illuminate\Contracts\Queue\ShouldQueue;
use Illuminate\Foundation\Bus\Dispatchable;
use Illuminate\Queue\InteractsWithQueue;
use Resilient\Laravel\Queue\Funnel;
use Resilient\Laravel\Queue\ReleaseWhenUnavailable;

// The jobs QueueSyncTest dispatches (loaded after Laravel's autoloader).

final class SyncRefusedJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    /** The refusal's message (an exception cannot be serialized onto a queue). */
    public function __construct(public string $refusal)
    {
    }

    public function middleware(): array
    {
        return [new ReleaseWhenUnavailable(1, 1)];
    }

    public function handle(): void
    {
        QueueSyncTest::$ran[] = 'handle';
        throw new \Resilient\FunnelFull($this->refusal);
    }
}

final class SyncFunnelJob implements ShouldQueue
{
    use Dispatchable, InteractsWithQueue, Queueable;

    public $timeout = 5;

    public function __construct(public string $name)
    {
    }

    public function middleware(): array
    {
        return [new Funnel($this->name, limit: 1)];
    }

    public function handle(): void
    {
        QueueSyncTest::$ran[] = 'funnel';
    }
}
