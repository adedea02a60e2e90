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
     * A web SAPI writes the table as HTML (cells escaped, an empty setting `<i>no value</i>`):
     * read cell by cell, the same words.
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

        if (str_contains($text, '<tr')) {
            preg_match_all('#<tr[^>]*>(.*?)</tr>#s', $text, $rows);
            foreach ($rows[1] as $row) {
                preg_match_all('#<t[dh][^>]*>(.*?)</t[dh]>#s', $row, $cells);
                $cells = array_map(fn (string $c) => trim(html_entity_decode(strip_tags($c), ENT_QUOTES | ENT_HTML5)), $cells[1]);
                if (count($cells) >= 2 && $cells[0] === $name) {
                    return $cells[1];
                }
            }

            return null;
        }

        // `name => value` for a row, `name => local value => master value` for a setting.
        return preg_match('/^' . preg_quote($name, '/') . ' => (.*?)(?: => .*)?$/m', $text, $m) === 1 ? $m[1] : null;
    }
}
