<?php

declare(strict_types=1);

/*
 * The smallest Laravel 8 (Debian's php-laravel-framework) that runs the seed's code outside a
 * full application: a container, facades, config, RedisManager on phpredis, CacheManager with
 * the redis store, Date (for now()) and the Http client factory.
 *
 * Shared by the benchmarks (bench/cases/*.php) and the lab's "Laravel way" variant:
 *
 *     require_once '/path/to/bench/laravel_bootstrap.php';
 *     $app = laravel_bootstrap(['redis_host' => '127.0.0.1', 'redis_port' => 6379]);
 *     Illuminate\Support\Facades\Redis::funnel('x')->limit(10)->...;
 *
 * Needs the redis (and igbinary) extension loaded, e.g. via tests/harness/php.sh.
 */

require_once '/usr/share/php/Illuminate/autoload.php';

use Illuminate\Cache\CacheManager;
use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Http\Client\Factory as HttpFactory;
use Illuminate\Redis\RedisManager;
use Illuminate\Support\DateFactory;
use Illuminate\Support\Facades\Date;
use Illuminate\Support\Facades\Facade;

if (!function_exists('now')) {
    /** Laravel's helper (Foundation/helpers.php is not part of this minimal set-up). */
    function now($tz = null)
    {
        return Date::now($tz);
    }
}

/**
 * @param array{redis_host?:string, redis_port?:int, redis_db?:int, prefix?:string} $options
 */
function laravel_bootstrap(array $options = []): Container
{
    $redis = [
        'host' => $options['redis_host'] ?? '127.0.0.1',
        'port' => (int) ($options['redis_port'] ?? 6379),
        'database' => (int) ($options['redis_db'] ?? 0),
        'timeout' => 1.0,
        'read_timeout' => 1.0,
    ];
    $prefix = $options['prefix'] ?? 'resilient-bench:';

    $app = new Container();
    Container::setInstance($app);
    $app->instance('app', $app);
    $app->instance('config', new Repository([
        'database' => ['redis' => ['client' => 'phpredis', 'options' => ['prefix' => $prefix], 'default' => $redis, 'cache' => $redis]],
        'cache' => [
            'default' => 'redis',
            'prefix' => rtrim($prefix, ':'),
            'stores' => ['redis' => ['driver' => 'redis', 'connection' => 'cache']],
        ],
    ]));
    $app->singleton('redis', fn ($app) => new RedisManager($app, 'phpredis', $app['config']['database.redis']));
    $app->bind('redis.connection', fn ($app) => $app['redis']->connection());
    $app->singleton('cache', fn ($app) => new CacheManager($app));
    $app->singleton('cache.store', fn ($app) => $app['cache']->driver());
    $app->singleton(DateFactory::class, fn () => new DateFactory());
    $app->alias(DateFactory::class, 'date');
    $app->singleton(HttpFactory::class, fn () => new HttpFactory());

    Facade::clearResolvedInstances();
    Facade::setFacadeApplication($app);
    return $app;
}
