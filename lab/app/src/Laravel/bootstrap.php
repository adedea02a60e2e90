<?php
/**
 * A minimal Laravel 8 container without an app skeleton: just what seed 000's ShippingQuoteClient
 * touches — config, the Redis manager (phpredis), the cache manager on Redis, and the Http factory —
 * behind the usual facades. Redis port from env LAB_REDIS_PORT.
 */
declare(strict_types=1);

require_once '/usr/share/php/Illuminate/autoload.php';
require_once '/usr/share/php/GuzzleHttp/autoload.php';
require_once __DIR__.'/RetryBudget.php';
require_once __DIR__.'/ShippingQuoteBusy.php';
require_once __DIR__.'/ShippingQuoteClient.php';

use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Http\Client\Factory as HttpFactory;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\Facades\Facade;

$app = new Container();
Container::setInstance($app);
$app->instance('config', new Repository([
    'database' => ['redis' => [
        'client' => 'phpredis',
        'options' => ['prefix' => 'lab:'],
        'default' => ['host' => '127.0.0.1', 'port' => (int) getenv('LAB_REDIS_PORT'), 'database' => 0,
            'persistent' => true, 'timeout' => 1.0, 'read_timeout' => 1.0],
    ]],
    'cache' => [
        'default' => 'redis',
        'prefix' => 'lab-cache',
        'stores' => ['redis' => ['driver' => 'redis', 'connection' => 'default']],
    ],
]));
$app->singleton('redis', fn ($app) => new RedisManager($app, 'phpredis', $app['config']['database.redis']));
$app->singleton('cache', fn ($app) => new CacheManager($app));
$app->singleton('cache.store', fn ($app) => $app['cache']->driver());
$app->singleton(HttpFactory::class, fn () => new HttpFactory());
Facade::clearResolvedInstances();
Facade::setFacadeApplication($app);
