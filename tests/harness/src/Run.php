<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * One test run: its id, its scratch directory and the shared-memory paths it may use.
 *
 * Every file a run creates lives under tests/.run/<id>/ or is named /dev/shm/resilient-test-<id>-*,
 * so tests/harness/phpunit.sh can remove all of it (and kill every process recorded under
 * pids/) when the run ends, whether it passed, failed or was interrupted.
 */
final class Run
{
    private static ?string $dir = null;

    public static function id(): string
    {
        $id = getenv('RESILIENT_RUN_ID');
        if ($id === false || $id === '') {
            $id = 'manual' . getmypid();
            putenv("RESILIENT_RUN_ID=$id");
        }
        return $id;
    }

    public static function root(): string
    {
        return dirname(__DIR__, 3);
    }

    /** Scratch directory of this run (created on first use). */
    public static function dir(): string
    {
        if (self::$dir === null) {
            $dir = getenv('RESILIENT_RUN_DIR');
            if ($dir === false || $dir === '') {
                $dir = self::root() . '/tests/.run/' . self::id();
                putenv("RESILIENT_RUN_DIR=$dir");
            }
            @mkdir($dir . '/pids', 0700, true);
            self::$dir = $dir;
        }
        return self::$dir;
    }

    /** A fresh scratch directory for one test. */
    public static function tempDir(string $tag): string
    {
        $dir = self::dir() . '/' . $tag . '-' . bin2hex(random_bytes(4));
        mkdir($dir, 0700, true);
        return $dir;
    }

    /** Segment file of this run for one purpose; tests that need an isolated segment pass their own tag. */
    public static function shmPath(string $tag): string
    {
        return '/dev/shm/resilient-test-' . self::id() . '-' . $tag . '.shm';
    }

    /**
     * Size of a segment file with $slots names: the 64-byte header and one entry per name
     * (`layout::segment_size` in crates/core/src/layout.rs; update ENTRY_SIZE with the layout).
     */
    public static function segmentSize(int $slots): int
    {
        $entrySize = 1984;
        return 64 + $slots * $entrySize;
    }

    /** A unique funnel / budget name, so tests sharing a segment never share an entry. */
    public static function name(string $prefix): string
    {
        return $prefix . '-' . bin2hex(random_bytes(3));
    }

    public static function extension(): string
    {
        $so = getenv('RESILIENT_SO');
        return ($so !== false && $so !== '') ? $so : self::root() . '/target/release/libresilient.so';
    }

    /** Remember a process we started, so the shell runner can kill it if PHPUnit dies first. */
    public static function trackPid(int $pid): void
    {
        @touch(self::dir() . "/pids/$pid");
    }

    public static function untrackPid(int $pid): void
    {
        @unlink(self::dir() . "/pids/$pid");
    }

    /** A TCP port on 127.0.0.1 that was free a moment ago. */
    public static function freePort(): int
    {
        $sock = stream_socket_server('tcp://127.0.0.1:0', $errno, $errstr);
        if ($sock === false) {
            throw new \RuntimeException("cannot find a free port: $errstr");
        }
        $name = stream_socket_get_name($sock, false);
        fclose($sock);
        return (int) substr($name, strrpos($name, ':') + 1);
    }
}
