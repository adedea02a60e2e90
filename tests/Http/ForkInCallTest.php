<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;

/**
 * `pcntl_fork` inside `on_attempt`, a call in flight. The child inherited the
 * runtime and the kept-alive socket and once received the parent's response. Now the child's
 * copy of the call fails with a clear \RuntimeException, it sends nothing and reads nothing;
 * the parent's call goes on unharmed. 1,000 forks, half while a retry is pending (the retry
 * would reuse the kept-alive connection), half on the final record.
 */
final class ForkInCallTest extends HttpTestCase
{
    public function testAChildForkedInsideOnAttemptNeverContinuesTheParentsCall(): void
    {
        $key = $this->up->key('forkcall');
        $this->up->script($key, [['status' => 503], ['status' => 200, 'body' => 'for-the-parent']], 'cycle');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$forkAt = 1;
            \$child = false;
            \$c = new Resilient\\Client('fork-in-call', [
                'base_url' => '$base',
                'backoff' => ['base' => 0.001, 'cap' => 0.001],
                'budget' => false,
                'on_attempt' => function (array \$a) use (&\$forkAt, &\$child): void {
                    if (\$a['attempt'] === \$forkAt) {
                        \$pid = pcntl_fork();
                        if (\$pid === 0) {
                            \$child = true;
                        } else {
                            \$GLOBALS['childPid'] = \$pid;
                        }
                    }
                },
            ]);
            \$out = ['parent_ok' => 0, 'child_exits' => []];
            for (\$i = 0; \$i < 1000; \$i++) {
                \$forkAt = \$i % 2 === 0 ? 1 : 2;
                try {
                    \$body = \$c->get('/q')->body();
                    if (\$child) {
                        exit(1); // the child got a response: the parent's bytes
                    }
                    \$out['parent_ok'] += \$body === 'for-the-parent' ? 1 : 0;
                } catch (RuntimeException \$e) {
                    if (\$child) {
                        exit(str_contains(\$e->getMessage(), 'forked') ? 0 : 2);
                    }
                    \$out['parent_error'] = \$e->getMessage();
                }
                pcntl_waitpid(\$GLOBALS['childPid'], \$status);
                \$code = pcntl_wifexited(\$status) ? pcntl_wexitstatus(\$status) : 100 + pcntl_wtermsig(\$status);
                \$out['child_exits'][\$code] = (\$out['child_exits'][\$code] ?? 0) + 1;
            }
            echo json_encode(\$out);
            PHP;
        $r = PhpProcess::code($code)->wait(120.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertArrayNotHasKey('parent_error', $out);
        $this->assertSame(1000, $out['parent_ok'], 'every parent call got its own answer');
        $this->assertSame([0 => 1000], $out['child_exits'], 'every child got the fork error, never a response');
        // The children sent nothing: exactly the parents' 2 attempts per call reached the upstream.
        $attempts = $this->up->attempts($key, 2000);
        $this->assertCount(2000, $attempts);
    }

    /**
     * A fatal error in the child, inside the `on_attempt` that forked, ends the child as a fatal
     * error does: once, exit code 255. It used to be followed by a second, uncaught fork error
     * "in [no active file]" raised after the fatal one.
     */
    public function testAFatalErrorInTheForkedChildEndsItOnce(): void
    {
        $code = <<<'PHP'
            $c = new Resilient\Client('fork-fatal', [
                'base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1, 'timeout' => 2,
                'on_attempt' => function (): void {
                    if (pcntl_fork() === 0) {
                        trigger_error('fatal in the child', E_USER_ERROR);
                    }
                },
            ]);
            try {
                $c->get('/');
            } catch (Resilient\Unavailable $e) {
            }
            pcntl_wait($status);
            echo "\n", json_encode(['child_exit' => pcntl_wexitstatus($status)]);
            PHP;
        $r = PhpProcess::code($code)->wait(20.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $output = $r->stdout . $r->stderr;
        $this->assertSame(1, substr_count($output, 'fatal in the child'), $r->describe());
        $this->assertStringNotContainsString('RuntimeException', $output, $r->describe());
        $lines = explode("\n", trim($r->stdout));
        $this->assertSame(['child_exit' => 255], json_decode(end($lines), true), $r->describe());
    }

    public function testTheForkErrorIsClear(): void
    {
        $key = $this->up->key('forkmsg');
        $this->up->script($key, [['status' => 503], ['status' => 200]], 'cycle');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('fork-msg', [
                'base_url' => '$base',
                'backoff' => ['base' => 0.001, 'cap' => 0.001],
                'budget' => false,
                'on_attempt' => function (array \$a): void {
                    if (\$a['attempt'] === 1 && pcntl_fork() === 0) {
                        \$GLOBALS['child'] = true;
                    }
                },
            ]);
            try {
                \$c->get('/q');
                if (!empty(\$GLOBALS['child'])) { exit(1); }
            } catch (RuntimeException \$e) {
                if (!empty(\$GLOBALS['child'])) {
                    // A new call in the child works, on the child's own runtime.
                    \$c2 = new Resilient\\Client('fork-msg-2', ['base_url' => '$base']);
                    \$next = \$c2->get('/again')->status();
                    file_put_contents(getenv('OUT'), json_encode(['class' => get_class(\$e), 'message' => \$e->getMessage(), 'next' => \$next]));
                    exit(0);
                }
            }
            pcntl_wait(\$status);
            echo pcntl_wexitstatus(\$status);
            PHP;
        $file = tempnam(sys_get_temp_dir(), 'forkmsg');
        $r = PhpProcess::code($code, [], ['OUT' => $file])->wait(20.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame('0', trim($r->stdout));
        $child = json_decode((string) file_get_contents($file), true);
        unlink($file);
        $this->assertSame('RuntimeException', $child['class']);
        $this->assertStringContainsString('in progress when this process forked', $child['message']);
        $this->assertSame(200, $child['next']);
    }
}
