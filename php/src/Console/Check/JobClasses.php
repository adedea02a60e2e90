<?php

namespace Resilient\Laravel\Console\Check;

use Illuminate\Contracts\Queue\ShouldQueue;

/**
 * The queued job classes of an app: every class implementing ShouldQueue declared in the PHP
 * files under the given directories (default app/Jobs). Classes are found by reading the files'
 * tokens, then loaded through the app's autoloader, so nothing runs but the class declarations.
 */
final class JobClasses
{
    /**
     * @param list<string> $paths
     * @param list<string> $errors gets a line per class that cannot be loaded (a missing parent,
     *        a parse error): the check cannot judge it, so it must not pass as "no findings"
     * @return list<class-string>
     */
    public static function in(array $paths, array &$errors = []): array
    {
        $classes = [];
        foreach ($paths as $path) {
            if (! is_dir($path)) {
                continue;
            }
            $files = new \RecursiveIteratorIterator(new \RecursiveDirectoryIterator($path, \FilesystemIterator::SKIP_DOTS));
            foreach ($files as $file) {
                if ($file->getExtension() !== 'php') {
                    continue;
                }
                foreach (self::declaredIn((string) file_get_contents($file->getPathname())) as $class) {
                    try {
                        // An abstract class never runs: the classes that extend it are checked.
                        $queued = class_exists($class) && is_subclass_of($class, ShouldQueue::class)
                            && ! (new \ReflectionClass($class))->isAbstract();
                    } catch (\Throwable $e) {
                        $errors[] = sprintf('%s: class %s cannot be loaded: %s', $file->getPathname(), $class, $e->getMessage());
                        continue;
                    }
                    if ($queued) {
                        $classes[] = $class;
                    }
                }
            }
        }
        sort($classes);

        return array_values(array_unique($classes));
    }

    /** @return list<string> fully qualified names of the classes a file declares */
    private static function declaredIn(string $source): array
    {
        $tokens = token_get_all($source);
        $namespace = '';
        $classes = [];
        for ($i = 0, $n = count($tokens); $i < $n; $i++) {
            $t = $tokens[$i];
            if (! is_array($t)) {
                continue;
            }
            if ($t[0] === T_NAMESPACE) {
                $namespace = '';
                for ($i++; $i < $n && $tokens[$i] !== ';' && $tokens[$i] !== '{'; $i++) {
                    if (is_array($tokens[$i]) && in_array($tokens[$i][0], [T_STRING, T_NAME_QUALIFIED], true)) {
                        $namespace .= $tokens[$i][1];
                    }
                }
            } elseif ($t[0] === T_CLASS && ! self::isClassConstant($tokens, $i)) {
                for ($j = $i + 1; $j < $n; $j++) {
                    if (is_array($tokens[$j]) && $tokens[$j][0] === T_STRING) {
                        $classes[] = ltrim($namespace . '\\' . $tokens[$j][1], '\\');
                        break;
                    }
                    if ($tokens[$j] === '(' || $tokens[$j] === '{') {
                        break;   // new class (...) {}: anonymous
                    }
                }
            }
        }

        return $classes;
    }

    /** `Foo::class` is not a declaration. */
    private static function isClassConstant(array $tokens, int $i): bool
    {
        for ($j = $i - 1; $j >= 0; $j--) {
            if (is_array($tokens[$j]) && $tokens[$j][0] === T_WHITESPACE) {
                continue;
            }

            return is_array($tokens[$j]) && $tokens[$j][0] === T_DOUBLE_COLON;
        }

        return false;
    }
}
