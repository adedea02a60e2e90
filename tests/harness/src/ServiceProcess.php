<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * A long-running service process (php-fpm master, nginx master, redis-server) we started:
 * output to files, pid recorded for the shell runner, stopped with SIGTERM then SIGKILL.
 */
final class ServiceProcess
{
    /** @param resource $proc */
    private function __construct(private $proc, public readonly int $pid)
    {
    }

    /** @param list<string> $cmd */
    public static function start(array $cmd, string $outBase): self
    {
        $proc = proc_open(
            $cmd,
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$outBase.out", 'w'], 2 => ['file', "$outBase.err", 'w']],
            $pipes,
        );
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start ' . implode(' ', $cmd));
        }
        $pid = proc_get_status($proc)['pid'];
        Run::trackPid($pid);
        return new self($proc, $pid);
    }

    public function isRunning(): bool
    {
        return $this->proc !== null && proc_get_status($this->proc)['running'];
    }

    /** SIGTERM (masters stop their workers), then SIGKILL after 5 s; bounded either way. */
    public function stop(): void
    {
        if ($this->proc === null) {
            return;
        }
        if (proc_get_status($this->proc)['running']) {
            posix_kill($this->pid, SIGTERM);
            $end = microtime(true) + 5;
            while (proc_get_status($this->proc)['running'] && microtime(true) < $end) {
                usleep(10_000);
            }
            if (proc_get_status($this->proc)['running']) {
                posix_kill($this->pid, SIGKILL);
                while (proc_get_status($this->proc)['running']) {
                    usleep(10_000);
                }
            }
        }
        proc_close($this->proc);
        $this->proc = null;
        Run::untrackPid($this->pid);
    }

    public function __destruct()
    {
        $this->stop();
    }
}
