<?php

namespace Resilient\Laravel\Facades;

use Illuminate\Support\Facades\Facade;

/**
 * @method static \Resilient\Client client(string $name)
 * @method static \Resilient\Funnel funnel(string $name)
 * @method static \Resilient\RetryBudget budget(string $name)
 * @method static mixed within(float $seconds, callable $fn)
 *
 * @see \Resilient\Laravel\ResilientManager
 */
final class Resilient extends Facade
{
    protected static function getFacadeAccessor(): string
    {
        return 'resilient';
    }
}
