<?php

// PSR-4 autoloader for machines without Composer (the tests use it).
spl_autoload_register(static function (string $class): void {
    $prefix = 'Resilient\\Laravel\\';
    if (str_starts_with($class, $prefix)) {
        $file = __DIR__ . '/src/' . str_replace('\\', '/', substr($class, strlen($prefix))) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
