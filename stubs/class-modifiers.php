<?php
/*
 * Reads cargo-php's stub on stdin and writes it with what cargo-php leaves out, read off the
 * loaded extension: `final` on the classes that are final, and a private constructor on those
 * that PHP code cannot instantiate (ext-php-rs gives them a public one that throws), so an IDE
 * or a static analyser flags `new Resilient\Metrics()` and `extends Resilient\Response` as
 * PHP would (with a docblock saying what `new` really throws). Run by stubs/generate.sh with
 * the extension loaded.
 */
declare(strict_types=1);

$class = null;
foreach (explode("\n", stream_get_contents(STDIN)) as $i => $line) {
    if (preg_match('/^(\s*)((?:final |abstract )*)class (\w+)\b(.*)$/', $line, $m)) {
        // Every class header names the class the members below it belong to.
        $class = new ReflectionClass('Resilient\\' . $m[3]);
        if ($class->isFinal() && !str_contains($m[2], 'final')) {
            $line = "{$m[1]}final {$m[2]}class {$m[3]}{$m[4]}";
        }
    } elseif ($class !== null && preg_match('/^(\s*)public function __construct\(\) \{\}$/', $line, $m)
        && !instantiable($class)) {
        $line = "{$m[1]}/** Not for PHP code: `new` throws an `\\Exception` (\"You cannot instantiate this class\n"
            . "{$m[1]} * from PHP\"), not the `\\Error` of a private constructor. */\n"
            . "{$m[1]}private function __construct() {}";
    }
    echo $i === 0 ? '' : "\n", $line;
}

function instantiable(ReflectionClass $class): bool
{
    try {
        $class->newInstance();
        return true;
    } catch (Throwable) {
        return false;
    }
}
