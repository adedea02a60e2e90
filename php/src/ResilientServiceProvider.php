<?php

namespace Resilient\Laravel;

use Illuminate\Http\Client\PendingRequest;
use Illuminate\Support\ServiceProvider;
use Resilient\Laravel\Http\ResilientPendingRequest;

/**
 * Registers the `resilient` manager (named clients, funnels and budgets from
 * config/resilient.php), `Http::resilient($name)`, and the deadline middleware alias.
 */
final class ResilientServiceProvider extends ServiceProvider
{
    /** The package's config file: merged under the app's, published, and the keys doctor and check know. */
    public const CONFIG = __DIR__ . '/../config/resilient.php';

    public function register(): void
    {
        $this->mergeConfigFrom(self::CONFIG, 'resilient');

        $this->app->singleton(ResilientManager::class, function ($app) {
            return new ResilientManager(
                fn () => (array) $app['config']->get('resilient', []),
                $app->bound('events') ? fn () => $app['events'] : null,
                $app->bound('log') ? fn (string $channel) => $app['log']->channel($channel) : null,
                ExtensionCheck::problem(),
            );
        });
        $this->app->alias(ResilientManager::class, 'resilient');

        $this->registerHttpMacro();
    }

    public function boot(): void
    {
        $this->checkExtension();
        $this->declareContext();

        if (method_exists($this->app, 'configPath')) {
            $this->publishes([
                self::CONFIG => $this->app->configPath('resilient.php'),
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

    /** `Http::resilient('shipping')`: Laravel's Http, sent by the named client. */
    private function registerHttpMacro(): void
    {
        if (! class_exists(PendingRequest::class)) {
            return;
        }
        $app = $this->app;
        PendingRequest::macro('resilient', function (string $name) use ($app) {
            /** @var PendingRequest $this */
            return ResilientPendingRequest::from($this, $name, $app->make(ResilientManager::class));
        });
    }

    /**
     * `defaults.context` (RESILIENT_CONTEXT) for the whole process, Funnel objects included:
     * clients take it as an option, but `Resilient::funnel()` and the queue middleware decide
     * from the `resilient.context` setting or the SAPI, and Octane's workers report `cli`.
     */
    private function declareContext(): void
    {
        if (extension_loaded('resilient')) {
            ResilientManager::declareContext($this->app['config']->get('resilient.defaults.context'));
        }
    }

    /**
     * A missing or mismatched extension fails a web request at boot with how to install it.
     * In the console it fails at the first client, funnel or budget instead, so
     * `composer install` (package:discover), `config:cache` and `resilient:doctor` still run.
     */
    private function checkExtension(): void
    {
        if ($this->app->runningInConsole()) {
            return;
        }
        ExtensionCheck::assertFits();
    }
}
