<?php

declare(strict_types=1);

/*
 * PHPUnit bootstrap. Run the suites through tests/harness/phpunit.sh (it runs PHPUnit with
 * tests/harness/php.sh, i.e. `php -n` + explicit extensions + this run's shm path, and cleans up
 * every process and file of the run afterwards, also when the run fails).
 */

spl_autoload_register(static function (string $class): void {
    $prefix = 'Resilient\\Tests\\Harness\\';
    if (str_starts_with($class, $prefix)) {
        require __DIR__ . '/harness/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
    }
});

if (!extension_loaded('resilient')) {
    fwrite(STDERR, "The resilient extension is not loaded (looked for " . Resilient\Tests\Harness\Run::extension()
        . ").\nBuild it with `make build` and run the suites with tests/harness/phpunit.sh (or `make test`).\n");
    exit(1);
}

Resilient\Tests\Harness\Run::dir();
