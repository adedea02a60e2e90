<?php

declare(strict_types=1);

namespace Resilient\Tests\Lab;

use Resilient\Tests\Harness\Run;

/**
 * The lab's binary (target/release/resilient-lab, built by `cargo build --release -p resilient-lab
 * -p resilient-upstream`) started in a session of its own, as a terminal would start it, and the
 * processes below it read from /proc.
 *
 * The binary itself, not lab/run.sh: run.sh first installs and builds the whole workspace, which
 * is not what these tests are about, and its own clean-up would hide what the lab leaves behind.
 */
final class LabProcess
{
    /** @var resource */
    private $proc;
    private ?int $exitCode = null;

    private function __construct($proc, public readonly int $pid, public readonly string $log)
    {
        $this->proc = $proc;
    }

    /** Starts the lab with `--root <repository>` and $args, its output in $log. */
    public static function start(array $args, string $log): self
    {
        $bin = Run::root() . '/target/release/resilient-lab';
        if (!is_executable($bin)) {
            throw new \RuntimeException("$bin is missing: cargo build --release -p resilient-lab -p resilient-upstream");
        }
        $proc = proc_open(
            ['setsid', $bin, '--root', Run::root(), ...$args],
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', $log, 'w'], 2 => ['redirect', 1]],
            $pipes,
            Run::root(),
        );
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start the lab');
        }
        $pid = proc_get_status($proc)['pid'];
        Run::trackPid($pid);
        return new self($proc, $pid, $log);
    }

    public function running(): bool
    {
        if ($this->exitCode !== null) {
            return false;
        }
        $s = proc_get_status($this->proc);
        if ($s['running']) {
            return true;
        }
        // Only the first call after the exit reports the code.
        $this->exitCode = $s['exitcode'];
        proc_close($this->proc);
        Run::untrackPid($this->pid);
        return false;
    }

    /** The exit code once the lab has exited (-1 if it was killed by a signal). */
    public function exitCode(): ?int
    {
        return $this->running() ? null : $this->exitCode;
    }

    public function output(): string
    {
        return (string) @file_get_contents($this->log);
    }

    /** @return list<int> every live descendant of $root */
    public static function descendants(int $root): array
    {
        $children = [];
        foreach (glob('/proc/[0-9]*/stat') ?: [] as $stat) {
            $s = @file_get_contents($stat);
            if ($s === false) {
                continue;
            }
            // pid (comm) state ppid ...: comm may contain spaces, so split after the last ')'.
            $pid = (int) $s;
            $rest = explode(' ', substr($s, strrpos($s, ')') + 2));
            $children[(int) $rest[1]][] = $pid;
        }
        $out = [];
        $todo = [$root];
        while ($todo) {
            foreach ($children[array_pop($todo)] ?? [] as $c) {
                $out[] = $c;
                $todo[] = $c;
            }
        }
        return $out;
    }

    public static function comm(int $pid): string
    {
        return trim((string) @file_get_contents("/proc/$pid/comm"));
    }

    public static function alive(int $pid): bool
    {
        $s = @file_get_contents("/proc/$pid/stat");
        // A zombie has exited; only its parent's wait is missing.
        return $s !== false && substr($s, strrpos($s, ')') + 2, 1) !== 'Z';
    }
}
