<?php

namespace Resilient\Laravel\Console;

use Symfony\Component\Console\Formatter\OutputFormatter;

/**
 * The human output of the resilient commands is text, never console markup: its lines and
 * table cells carry names from config and messages that quote values, and a name such as
 * `pay<fg=green>v2</>` read as markup shows a row for a name that does not exist. (The
 * commands' own styles, `error` and `warning`, wrap the escaped text.)
 */
trait PlainText
{
    public function line($string, $style = null, $verbosity = null)
    {
        parent::line(OutputFormatter::escape((string) $string), $style, $verbosity);
    }

    public function table($headers, $rows, $tableStyle = 'default', array $columnStyles = [])
    {
        $escape = fn (array $cells): array => array_map(
            fn ($cell) => is_scalar($cell) ? OutputFormatter::escape((string) $cell) : $cell,
            $cells,
        );
        parent::table($escape((array) $headers), array_map($escape, $rows), $tableStyle, $columnStyles);
    }
}
