<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/../../Http/support/HttpTestCase.php';

use Illuminate\Config\Repository;
use Illuminate\Container\Container;
use Illuminate\Foundation\Application;
use Illuminate\Support\Facades\Facade;
use Resilient\Laravel\ResilientServiceProvider;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Http\MockUpstream;

/**
 * A real Illuminate Application (Debian's Laravel 8) with the package's provider, its config
 * given per test, and the shared mock upstream for the clients to call.
 */
abstract class PackageTestCase extends TestCase
{
    protected Application $app;
    protected MockUpstream $up;

    public static function setUpBeforeClass(): void
    {
        require_once '/usr/share/php/Illuminate/autoload.php';
        require_once '/usr/share/php/GuzzleHttp/autoload.php';
        require_once __DIR__ . '/../../../php/autoload.php';
    }

    protected function setUp(): void
    {
        $this->up = MockUpstream::shared();
        // Laravel 8 predates PHP 8.2 (dynamic properties, e.g. Response::$cookies): its own
        // deprecations are not this package's; every other notice still fails the test.
        $previous = null;
        $previous = set_error_handler(static function (int $no, string $msg, string $file = '', int $line = 0) use (&$previous) {
            if ($no === E_DEPRECATED && str_starts_with($file, '/usr/share/php/')) {
                return true;
            }

            return $previous ? $previous($no, $msg, $file, $line) : false;
        });
    }

    protected function tearDown(): void
    {
        restore_error_handler();
        Facade::clearResolvedInstances();
        Container::setInstance(null);
    }

    /**
     * The start of a child PHP script (for a process run without the extension, or with another
     * ini): Laravel's and the package's autoloaders, an Application with `$resilient` as the
     * package's config, the facades bound and the provider registered, not booted.
     */
    protected static function childApp(array $resilient): string
    {
        $config = var_export(['resilient' => $resilient], true);

        return <<<PHP
            require '/usr/share/php/Illuminate/autoload.php';
            require getcwd() . '/php/autoload.php';
            \$app = new Illuminate\\Foundation\\Application(sys_get_temp_dir());
            \$app->instance('config', new Illuminate\\Config\\Repository($config));
            Illuminate\\Support\\Facades\\Facade::setFacadeApplication(\$app);
            \$app->register(Resilient\\Laravel\\ResilientServiceProvider::class);

            PHP;
    }

    /**
     * Runs each of `$calls` (PHP closures, as code) in a child process without the extension,
     * after `$setup` (childApp() and what the calls need), and asserts that each one throws
     * the install message, not "class not found".
     */
    protected function assertEachSaysHowToInstall(string $setup, string $calls, int $count): void
    {
        $code = $setup . "\nforeach ([$calls] as \$call) {" . <<<'PHP'
                try {
                    $call();
                    echo "answered\n";
                } catch (Throwable $e) {
                    echo get_class($e), ': ', str_replace("\n", ' ', $e->getMessage()), "\n";
                }
            }
            PHP;
        $result = PhpProcess::code($code, [], ['RESILIENT_SO' => '/nonexistent/resilient.so', 'APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $lines = explode("\n", trim($result->stdout));
        $this->assertCount($count, $lines, $result->describe());
        foreach ($lines as $line) {
            $this->assertStringStartsWith('RuntimeException: resilient/laravel needs the resilient PHP extension (ext-resilient ^0.1), but it is not loaded', $line, $result->describe());
            $this->assertStringContainsString('make install', $line);
        }
    }

    /**
     * The rest of a childApp() script that boots the app and runs artisan command `$class`
     * without arguments: it prints `exit N` and the output, or `thrown Class: message` and the
     * output so far.
     */
    protected static function commandInChild(string $class): string
    {
        return <<<PHP
            \$app->boot();
            \$command = new $class();
            \$command->setLaravel(\$app);
            \$out = new Symfony\\Component\\Console\\Output\\BufferedOutput();
            try {
                \$exit = \$command->run(new Symfony\\Component\\Console\\Input\\ArrayInput([]), \$out);
                echo "exit \$exit\\n", \$out->fetch();
            } catch (Throwable \$e) {
                echo 'thrown ', get_class(\$e), ': ', \$e->getMessage(), "\\n", \$out->fetch();
            }

            PHP;
    }

    /** Boots an app whose config/resilient.php is the package's merged with $resilient. */
    protected function boot(array $resilient, array $more = []): Application
    {
        $this->app = new Application(Run::tempDir('laravel'));
        $this->app->instance('config', new Repository(['resilient' => $resilient] + $more));
        Facade::clearResolvedInstances();
        Facade::setFacadeApplication($this->app);
        $this->app->register(ResilientServiceProvider::class);
        $this->app->boot();

        return $this->app;
    }

    /** A client config on a fresh upstream key: [client name, key, config entry]. */
    protected function upstreamClient(string $tag, array $options = []): array
    {
        $key = $this->up->key($tag);

        return [Run::name($tag), $key, $options + ['base_url' => $this->up->base($key)]];
    }
}
