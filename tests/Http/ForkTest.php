<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;

/**
 * Must show 10: pcntl_fork in CLI after the client was used (runtime, connection pool and a
 * kept-alive connection exist in the parent): the child's calls work with its own runtime, the
 * parent's keep working, and neither process hangs.
 */
final class ForkTest extends HttpTestCase
{
    public function testAForkedChildGetsItsOwnRuntime(): void
    {
        $key = $this->up->key('fork');
        $this->up->script($key, [['status' => 200, 'body' => 'pong']]);
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('fork-test', ['base_url' => '$base', 'deadline' => 5]);
            \$out = ['parent_before' => \$c->get('/ping')->body()];
            \$pid = pcntl_fork();
            if (\$pid === 0) {
                \$ok = \$c->get('/child')->body() === 'pong' && \$c->get('/child')->body() === 'pong';
                \$c2 = new Resilient\\Client('fork-test-2', ['base_url' => '$base']);
                \$ok = \$ok && \$c2->pool([['GET', '/child-pool'], ['GET', '/child-pool']], 2)[1]->body() === 'pong';
                exit(\$ok ? 0 : 3);
            }
            \$out['parent_during'] = \$c->get('/parent')->body();
            pcntl_waitpid(\$pid, \$status);
            \$out['child_exit'] = pcntl_wexitstatus(\$status);
            \$out['parent_after'] = \$c->get('/parent')->body();
            echo json_encode(\$out);
            PHP;
        $r = PhpProcess::code($code)->wait(20.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame(['parent_before' => 'pong', 'parent_during' => 'pong', 'child_exit' => 0, 'parent_after' => 'pong'], $r->json());
        $paths = array_count_values(array_column($this->up->attempts($key, 7), 'path'));
        ksort($paths);
        $this->assertSame(['/child' => 2, '/child-pool' => 2, '/parent' => 2, '/ping' => 1], $paths);
    }
}
