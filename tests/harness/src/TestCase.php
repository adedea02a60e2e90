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

    /** Run a fixture script to completion and return its JSON output (asserting a clean exit). */
    protected function runJson(string $script, array $args = [], array $ini = [], float $timeout = 30.0): array
    {
        $r = PhpProcess::runScript($script, $args, $ini, $timeout);
        $this->assertSame(0, $r->exitCode, "$script did not exit cleanly:\n" . $r->describe());
        return $r->json();
    }
}
