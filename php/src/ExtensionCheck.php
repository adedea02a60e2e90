<?php

namespace Resilient\Laravel;

/**
 * Is the loaded `resilient` extension one this package was written for?
 *
 * Composer checks `ext-resilient` only when it installs; PHP-FPM, a queue worker or a deploy
 * target may run another PHP with another (or no) extension. A mismatch found at boot says
 * what to do; one found at the first call says only "class Resilient\Client not found".
 */
final class ExtensionCheck
{
    /** Must equal `require.ext-resilient` in php/composer.json (a test compares them). */
    public const REQUIRED = '^0.1';

    /** The problem with the loaded extension, or null when it fits REQUIRED. */
    public static function problem(): ?string
    {
        $loaded = extension_loaded('resilient') ? (string) phpversion('resilient') : null;

        return self::describe($loaded, self::REQUIRED, PHP_SAPI, php_ini_loaded_file() ?: null);
    }

    /**
     * Throws the problem with the loaded extension as a RuntimeException, if there is one: where
     * the package would next touch a class of the extension, how to install it instead of
     * "class not found".
     */
    public static function assertFits(): void
    {
        if (($problem = self::problem()) !== null) {
            throw new \RuntimeException($problem);
        }
    }

    /** The message for a loaded version (null: not loaded) against a caret constraint. */
    public static function describe(?string $loaded, string $constraint, string $sapi, ?string $ini): ?string
    {
        $how = 'Install it from the extension\'s repository with `make install` (builds resilient.so into '
            . '`php-config --extension-dir` and enables `extension=resilient` for CLI and FPM), or add '
            . '`extension=resilient` to the php.ini of every PHP that runs this app, then restart PHP-FPM '
            . 'and the queue workers.';
        $where = sprintf('this PHP (%s %s, php.ini: %s)', PHP_VERSION, $sapi, $ini ?? 'none');
        if ($loaded === null) {
            return "resilient/laravel needs the resilient PHP extension (ext-resilient $constraint), "
                . "but it is not loaded in $where. $how";
        }
        if (! self::satisfies($loaded, $constraint)) {
            return "resilient/laravel needs ext-resilient $constraint, but $where has resilient $loaded. $how";
        }

        return null;
    }

    /**
     * Composer's caret: `^1.2` = >=1.2.0 <2.0.0; `^0.3` = >=0.3.0 <0.4.0; `^0.0.3` = >=0.0.3 <0.0.4.
     * `*` matches anything. Alternatives (`^1.0|^2.0`) are each tried.
     */
    public static function satisfies(string $version, string $constraint): bool
    {
        foreach (preg_split('/\s*\|\|?\s*/', trim($constraint)) as $one) {
            if ($one === '*') {
                return true;
            }
            if (! preg_match('/^\^(\d+)(?:\.(\d+))?(?:\.(\d+))?$/', $one, $m)) {
                throw new \InvalidArgumentException("resilient: unsupported version constraint '$one' (use ^x.y)");
            }
            $parts = [(int) $m[1], (int) ($m[2] ?? 0), (int) ($m[3] ?? 0)];
            $min = implode('.', $parts);
            // The first non-zero part is the one that may not change.
            $given = count(array_filter([$m[1], $m[2] ?? null, $m[3] ?? null], fn ($p) => $p !== null && $p !== ''));
            if ($parts[0] > 0 || $given === 1) {
                $max = ($parts[0] + 1) . '.0.0';
            } elseif ($parts[1] > 0 || $given === 2) {
                $max = '0.' . ($parts[1] + 1) . '.0';
            } else {
                $max = '0.0.' . ($parts[2] + 1);
            }
            $plain = preg_replace('/[-+].*$/', '', $version);
            if (version_compare($plain, $min, '>=') && version_compare($plain, $max, '<')) {
                return true;
            }
        }

        return false;
    }
}
