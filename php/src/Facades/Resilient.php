<?php

namespace Resilient\Laravel\Facades;

use Illuminate\Support\Facades\Facade;

/**
 * @method static \Resilient\Client|\Resilient\Laravel\Testing\ClientFake client(string $name)
 * @method static \Resilient\Funnel funnel(string $name)
 * @method static \Resilient\RetryBudget budget(string $name)
 * @method static mixed within(float $seconds, callable $fn)
 * @method static array clientConfig(string $name)
 * @method static array clientConfigs() name => options, as clientConfig() gives them
 * @method static \Resilient\Laravel\Testing\FakeClients fake(array|null $scripts = null) name => list of \Resilient\Response|\Throwable (one per call), a single answer (repeated) or fn (RecordedRequest $r) => answer; null: every configured name answers 200
 * @method static \Resilient\Laravel\Testing\FakeClients preventStrayRequests(bool $prevent = true)
 * @method static void assertSent(callable $callback) fn (\Resilient\Laravel\Testing\RecordedRequest $request, \Resilient\Response|\Throwable $outcome): bool
 * @method static void assertNotSent(callable $callback)
 * @method static void assertSentCount(int $count)
 * @method static void assertNothingSent()
 * @method static array recorded(callable|null $callback = null) list of [RecordedRequest, Response|Throwable]
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
