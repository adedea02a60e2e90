<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/** Base class of the suites: bounded waiting and child-process helpers. */
abstract class TestCase extends \PHPUnit\Framework\TestCase
{
    /**
     * Poll $probe until it returns something other than null/false, at most $timeout seconds.
     * Returns [value, seconds waited]; fails the test with $what when time runs out.
     */
    protected function waitFor(callable $probe, float $timeout, string $what, float $every = 0.01): array
    {
        $start = microtime(true);
        do {
            $v = $probe();
            if ($v !== null && $v !== false) {
                return [$v, microtime(true) - $start];
            }
            usleep((int) ($every * 1e6));
        } while (microtime(true) - $start < $timeout);
        $this->fail(sprintf('timed out after %.1f s waiting for %s', $timeout, $what));
    }

    /** Skips the test unless it can run processes as another user (root, with setpriv). */
    protected function needSetpriv(): void
    {
        if (posix_geteuid() !== 0 || trim((string) shell_exec('command -v setpriv')) === '') {
            $this->markTestSkipped('needs root and setpriv to run a process as another user');
        }
    }

    /**
     * Runs `tests/harness/php.sh` with $args as uid (and gid) $uid, groups cleared, from `/`.
     *
     * @param list<string> $args
     * @return array{0: int, 1: string, 2: string} exit code, stdout, stderr
     */
    protected function phpAs(int $uid, array $args): array
    {
        $cmd = ['setpriv', "--reuid=$uid", "--regid=$uid", '--clear-groups', Run::root() . '/tests/harness/php.sh', ...$args];
        $proc = proc_open($cmd, [0 => ['file', '/dev/null', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']], $pipes, '/');
        $stdout = (string) stream_get_contents($pipes[1]);
        $stderr = (string) stream_get_contents($pipes[2]);

        return [proc_close($proc), $stdout, $stderr];
    }

    /** Run a fixture script to completion and return its JSON output (asserting a clean exit). */
    protected function runJson(string $script, array $args = [], array $ini = [], float $timeout = 30.0): array
    {
        $r = PhpProcess::runScript($script, $args, $ini, $timeout);
        $this->assertSame(0, $r->exitCode, "$script did not exit cleanly:\n" . $r->describe());
        return $r->json();
    }
}
