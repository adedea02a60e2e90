<?php
/*
 * Reads cargo-php's stub on stdin and writes it with what cargo-php leaves out, read off the
 * loaded extension: `final` on the classes that are final, and a private constructor on those
 * that PHP code cannot instantiate (ext-php-rs gives them a public one that throws), so an IDE
 * or a static analyser flags `new Resilient\Metrics()` and `extends Resilient\Response` as
 * PHP would (with a docblock saying what `new` really throws), and `#[\SensitiveParameter]` on
 * the parameters the extension marks so (src/sensitive.rs: options, bodies, headers), so the
 * stub tells a reader which arguments a stack trace leaves out. Run by stubs/generate.sh with
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
    } elseif ($class !== null && preg_match('/^\s*(?:public |protected |private |static |final |abstract )+function (\w+)\(/', $line, $m)
        && $class->hasMethod($m[1])) {
        $line = markSensitive($class->getMethod($m[1]), $line);
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

/** The stub line of $method with `#[\SensitiveParameter]` before each parameter PHP marks so. */
function markSensitive(ReflectionMethod $method, string $line): string
{
    foreach ($method->getParameters() as $parameter) {
        if ($parameter->getAttributes(SensitiveParameter::class) !== []) {
            $name = preg_quote($parameter->getName(), '/');
            $line = preg_replace('/((?:\??[\w\\\\|]+ )?&?(?:\.\.\.)?\$' . $name . '\b)/', '#[\\SensitiveParameter] $1', $line, 1);
        }
    }
    return $line;
}
