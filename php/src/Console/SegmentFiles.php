<?php

namespace Resilient\Laravel\Console;

/**
 * The shared-memory segment files on this host: ours (from `resilient.shm_path`, else the
 * default `/dev/shm/resilient-<uid>.v<layout>.shm`) and any other `resilient-*.shm` beside it or
 * in /dev/shm. A file owned by another user means processes of that user (typically FPM as
 * www-data while queue workers run as a deploy user) keep their own funnels and budgets: the
 * limits are per user, not per host. One of this user's of another layout version means
 * processes of another build count apart from this one's until they are restarted.
 */
final class SegmentFiles
{
    /** The layout version in the default file name, for an extension without `Metrics::segmentPath()`. */
    public const LAYOUT = 8;

    /** The segment path this process uses. */
    public static function path(): string
    {
        if (method_exists(\Resilient\Metrics::class, 'segmentPath')) {
            return \Resilient\Metrics::segmentPath();
        }
        $ini = ini_get('resilient.shm_path');
        if (is_string($ini) && $ini !== '') {
            return $ini;
        }

        return sprintf('/dev/shm/resilient-%d.v%d.shm', self::uid(), self::LAYOUT);
    }

    /**
     * The segment's path when no process created it yet and one could (the file is absent, its
     * folder is there), else null. A command that only reads state checks this first: opening
     * the segment creates it, mode 0600 for this process's user, and created by an operator's
     * user at a `resilient.shm_path` PHP-FPM shares, it would lock the FPM workers out.
     */
    public static function notCreatedYet(): ?string
    {
        $path = self::path();
        clearstatcache(true, $path);

        return ! file_exists($path) && is_dir(dirname($path)) ? $path : null;
    }

    /**
     * `$run()` with this process's segment moved to a stand-in beside `$path` (removed after): a
     * command that reads state before any process created the segment still builds what its
     * users build (and so validates their options and this folder) without creating it.
     *
     * @template T
     * @param callable(): T $run
     * @return T
     */
    public static function withStandIn(string $path, callable $run): mixed
    {
        $standIn = sprintf('%s/resilient-standin-%d-%s.shm', dirname($path), getmypid(), bin2hex(random_bytes(4)));
        $old = ini_get('resilient.shm_path');
        ini_set('resilient.shm_path', $standIn);
        try {
            return $run();
        } finally {
            ini_set('resilient.shm_path', $old === false ? '' : $old);
            @unlink($standIn);
        }
    }

    /** Whether this process runs as root: a segment it creates (mode 0600) is then root's alone. */
    public static function runsAsRoot(): bool
    {
        return function_exists('posix_geteuid') && posix_geteuid() === 0;
    }

    /**
     * The segment at a configured `resilient.shm_path` when it exists and root owns it: the FPM
     * workers of another user that share the path cannot use it, and each counts alone.
     */
    public static function sharedPathOwnedByRoot(): ?string
    {
        $ini = ini_get('resilient.shm_path');
        if (! is_string($ini) || $ini === '') {
            return null;
        }
        $d = self::describe(self::path());

        return $d['exists'] && $d['uid'] === 0 ? $d['path'] : null;
    }

    public static function uid(): int
    {
        return function_exists('posix_getuid') ? posix_getuid() : (int) getmyuid();
    }

    /** @return array{path: string, exists: bool, owner?: string, uid?: int, mode?: string, size?: int} */
    public static function describe(string $path): array
    {
        clearstatcache(true, $path);
        $st = @lstat($path);
        if ($st === false) {
            return ['path' => $path, 'exists' => false];
        }

        return [
            'path' => $path,
            'exists' => true,
            'uid' => $st['uid'],
            'owner' => self::userName($st['uid']),
            'mode' => sprintf('%04o', $st['mode'] & 07777),
            'size' => $st['size'],
        ];
    }

    /**
     * The shared-memory layout version of the loaded build (as `php --ri resilient` shows it;
     * else from the default path's name, when that path is in effect), or null.
     */
    public static function layout(): ?int
    {
        $shown = ExtensionInfo::value('Shared-memory layout version');
        if ($shown !== null && ctype_digit($shown)) {
            return (int) $shown;
        }
        $ini = ini_get('resilient.shm_path');

        return ($ini === false || $ini === '') && preg_match('/\.v(\d+)\.shm$/', self::path(), $m) === 1 ? (int) $m[1] : null;
    }

    /**
     * This user's segment files at the default name of another layout version than $layout
     * (`resilient-<uid>.v<layout>.shm`): after an upgrade that changed the layout, processes
     * still on the other build (a queue worker not restarted yet) count there, apart from
     * this build's.
     *
     * @return list<array> as describe(), with the file's `layout`
     */
    public static function ofOtherLayouts(string $ours, int $layout): array
    {
        $found = [];
        foreach (array_unique([dirname($ours), '/dev/shm']) as $dir) {
            foreach (glob(sprintf('%s/resilient-%d.v*.shm', $dir, self::uid())) ?: [] as $file) {
                if ($file === $ours || preg_match('/^resilient-\d+\.v(\d+)\.shm$/', basename($file), $m) !== 1 || (int) $m[1] === $layout) {
                    continue;
                }
                $d = self::describe($file);
                // Another user's file is ofOtherUsers()'s.
                if ($d['exists'] && $d['uid'] === self::uid()) {
                    $found[$file] = $d + ['layout' => (int) $m[1]];
                }
            }
        }
        ksort($found);

        return array_values($found);
    }

    /** @return list<array> segment files owned by another uid than this process's */
    public static function ofOtherUsers(string $ours): array
    {
        $dirs = array_unique([dirname($ours), '/dev/shm']);
        $found = [];
        foreach ($dirs as $dir) {
            foreach (glob($dir . '/resilient-*.shm') ?: [] as $file) {
                $d = self::describe($file);
                if ($d['exists'] && $d['uid'] !== self::uid()) {
                    $found[$file] = $d;
                }
            }
        }
        ksort($found);

        return array_values($found);
    }

    public static function userName(int $uid): string
    {
        $pw = function_exists('posix_getpwuid') ? posix_getpwuid($uid) : false;

        return is_array($pw) ? $pw['name'] : "uid $uid";
    }
}
