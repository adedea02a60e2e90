<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * A child `php` process started through tests/harness/php.sh (the one PHP invocation of the suite).
 *
 * Output goes to files, not pipes, so many children can run at once without anyone draining
 * pipes; the pid is php's own (php.sh execs), so signals reach the process under test. Every
 * wait is bounded: a child that outlives its timeout is killed and reported as timed out.
 */
final class PhpProcess
{
    /** @var resource */
    private $proc;
    private int $pid;
    private ?ProcessResult $result = null;

    /**
     * @param list<string> $argv arguments after php's own flags, e.g. [script, arg...] or ['-r', code]
     * @param array<string,string|int|float> $ini extra -d settings (they win over php.sh's)
     * @param array<string,string> $env extra environment
     */
    private function __construct(array $argv, array $ini, array $env, private readonly string $outBase)
    {
        $cmd = [Run::root() . '/tests/harness/php.sh'];
        // Children share this process's segment unless the caller points them elsewhere.
        $ini += ['resilient.shm_path' => (string) ini_get('resilient.shm_path')];
        foreach ($ini as $k => $v) {
            $cmd[] = '-d';
            $cmd[] = "$k=$v";
        }
        array_push($cmd, ...$argv);
        $fullEnv = array_merge(getenv(), $env);
        $proc = proc_open(
            $cmd,
            [0 => ['file', '/dev/null', 'r'], 1 => ['file', "$outBase.out", 'w'], 2 => ['file', "$outBase.err", 'w']],
            $pipes,
            Run::root(),
            $fullEnv,
        );
        if (!is_resource($proc)) {
            throw new \RuntimeException('cannot start php: ' . implode(' ', $cmd));
        }
        $this->proc = $proc;
        $this->pid = proc_get_status($proc)['pid'];
        Run::trackPid($this->pid);
    }

    /** Start a fixture script from tests/fixtures/cli/ (or any path) with arguments. */
    public static function script(string $script, array $args = [], array $ini = [], array $env = []): self
    {
        if (!str_contains($script, '/')) {
            $script = Run::root() . '/tests/fixtures/cli/' . $script;
        }
        return new self([$script, ...array_map('strval', $args)], $ini, $env, self::outBase());
    }

    /** Start `php -r <code>`; the code runs with the harness's ini and the extension loaded. */
    public static function code(string $code, array $ini = [], array $env = []): self
    {
        return new self(['-r', $code], $ini, $env, self::outBase());
    }

    /** Start php with raw arguments (e.g. ['--re', 'resilient']). */
    public static function args(array $argv, array $ini = [], array $env = []): self
    {
        return new self(array_map('strval', $argv), $ini, $env, self::outBase());
    }

    private static function outBase(): string
    {
        $dir = Run::dir() . '/proc';
        @mkdir($dir, 0700, true);
        return $dir . '/' . bin2hex(random_bytes(6));
    }

    public function pid(): int
    {
        return $this->pid;
    }

    /** Whatever the child has written to stdout so far. */
    public function stdoutSoFar(): string
    {
        return (string) @file_get_contents($this->outBase . '.out');
    }

    public function isRunning(): bool
    {
        if ($this->result !== null) {
            return false;
        }
        $st = proc_get_status($this->proc);
        if (!$st['running']) {
            $this->finish($st, false);
            return false;
        }
        return true;
    }

    /** Poll stdout until $predicate(stdout) is true; false on timeout or if the child ended first. */
    public function waitForOutput(callable $predicate, float $timeout): bool
    {
        $end = microtime(true) + $timeout;
        do {
            if ($predicate($this->stdoutSoFar())) {
                return true;
            }
            if (!$this->isRunning()) {
                return (bool) $predicate($this->stdoutSoFar());
            }
            usleep(5_000);
        } while (microtime(true) < $end);
        return false;
    }

    public function signal(int $signal): void
    {
        if ($this->result === null) {
            posix_kill($this->pid, $signal);
        }
    }

    /** Wait (bounded) for the child to end; kill it with SIGKILL when the time is up. */
    public function wait(float $timeout = 30.0): ProcessResult
    {
        $end = microtime(true) + $timeout;
        while ($this->result === null) {
            $st = proc_get_status($this->proc);
            if (!$st['running']) {
                $this->finish($st, false);
                break;
            }
            if (microtime(true) >= $end) {
                posix_kill($this->pid, SIGKILL);
                while (($st = proc_get_status($this->proc))['running']) {
                    usleep(2_000);
                }
                $this->finish($st, true);
                break;
            }
            usleep(2_000);
        }
        return $this->result;
    }

    private function finish(array $st, bool $timedOut): void
    {
        proc_close($this->proc);
        Run::untrackPid($this->pid);
        $this->result = new ProcessResult(
            $st['signaled'] ? 128 + $st['termsig'] : $st['exitcode'],
            $st['signaled'] ? $st['termsig'] : null,
            (string) @file_get_contents($this->outBase . '.out'),
            (string) @file_get_contents($this->outBase . '.err'),
            $timedOut,
        );
    }

    public function __destruct()
    {
        if ($this->result === null) {
            $this->wait(0.0);
        }
    }

    /** Run a script to completion. */
    public static function runScript(string $script, array $args = [], array $ini = [], float $timeout = 30.0): ProcessResult
    {
        return self::script($script, $args, $ini)->wait($timeout);
    }

    /** Run `php -r` code to completion. */
    public static function runCode(string $code, array $ini = [], float $timeout = 30.0): ProcessResult
    {
        return self::code($code, $ini)->wait($timeout);
    }
}
