<?php

namespace Resilient\Laravel;

/**
 * Strings a user gave (config values, URLs), read and shown as the extension reads and shows
 * them.
 *
 * @internal
 */
final class GivenText
{
    /** RFC 9110 token characters: what an option's word, a name or a number is made of. */
    private const TOKEN_CHARACTERS = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789'
        . "!#$%&'*+-.^_`|~";

    /** The longest part of a value a message shows. */
    private const SHOWN_LENGTH = 64;

    /**
     * Unicode whitespace (the White_Space property), which the extension trims from a URL (Rust's
     * `trim()`): ASCII's, U+0085, U+00A0 and the other spaces and separators.
     */
    private const WHITESPACE = '[\t\n\x{0B}\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}]';

    /**
     * $value as a message may quote it: up to its first character that is not a token
     * character, then "…", 64 characters at most (as the extension's `shown_name`). A word
     * such as `Local` shows whole; a secret pasted where a word belongs (a Redis URL with its
     * password, a `Bearer …` line) shows only its start, `redis…`.
     */
    public static function shown(string $value): string
    {
        $end = strspn($value, self::TOKEN_CHARACTERS);
        if ($end === strlen($value) && $end <= self::SHOWN_LENGTH) {
            return $value;
        }

        return substr($value, 0, min($end, self::SHOWN_LENGTH)) . '…';
    }

    /**
     * $text without the whitespace around it, as the extension reads a `base_url` or a path:
     * one given with a space or U+00A0 in front is still the URL the client calls.
     */
    public static function trimmed(string $text): string
    {
        $pattern = '/^' . self::WHITESPACE . '+|' . self::WHITESPACE . '+$/u';

        // Not UTF-8 (which the client refuses): ASCII's whitespace only.
        return preg_replace($pattern, '', $text) ?? trim($text, " \t\n\r\f\v");
    }
}
