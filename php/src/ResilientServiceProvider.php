<?php

namespace Resilient\Laravel;

use Illuminate\Support\ServiceProvider;

/**
 * Registers the `resilient` manager (named clients, funnels and budgets from
 * config/resilient.php) and the deadline middleware alias.
 */
final class ResilientServiceProvider extends ServiceProvider
{
    public function register(): void
    {
        $this->mergeConfigFrom(__DIR__ . '/../config/resilient.php', 'resilient');

        $this->app->singleton(ResilientManager::class, function ($app) {
            return new ResilientManager($app['config']->get('resilient', []));
        });
        $this->app->alias(ResilientManager::class, 'resilient');
    }

    public function boot(): void
    {
        if (method_exists($this->app, 'configPath')) {
            $this->publishes([
                __DIR__ . '/../config/resilient.php' => $this->app->configPath('resilient.php'),
            ], 'resilient-config');
        }

        if ($this->app->runningInConsole()) {
            $this->commands([
                Console\StatusCommand::class,
                Console\DoctorCommand::class,
                Console\CheckCommand::class,
            ]);
        }

        if ($this->app->bound('router')) {
            $this->app['router']->aliasMiddleware('resilient.deadline', Middleware\WithinDeadline::class);
        }
    }
}
