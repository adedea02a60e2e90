<?php

namespace Resilient\Laravel\Console;

/**
 * What `php --ri resilient` shows, read by name: the extension writes it from the build it is
 * (its shared-memory layout version) and masks what must not be shown (the password in
 * `resilient.backend`), so the commands print its words rather than compute their own.
 */
final class ExtensionInfo
{
    /**
     * A row's value (`Shared-memory layout version`) or a setting's local value
     * (`resilient.backend`), as the CLI's text form shows it; null when the build shows none.
     */
    public static function value(string $name): ?string
    {
        ob_start();
        try {
            (new \ReflectionExtension('resilient'))->info();
        } catch (\ReflectionException) {
            return null;
        } finally {
            $text = (string) ob_get_clean();
        }

        // `name => value` for a row, `name => local value => master value` for a setting.
        return preg_match('/^' . preg_quote($name, '/') . ' => (.*?)(?: => .*)?$/m', $text, $m) === 1 ? $m[1] : null;
    }
}
