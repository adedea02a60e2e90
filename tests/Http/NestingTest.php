<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;

/**
 * Nesting depth: `on_attempt` re-entering the client 1,000 deep once crashed PHP with SIGSEGV (each
 * level costs C stack). Now a call is refused with a clear \RuntimeException when the stack
 * runs low: 100,000 levels asked for end with that exception at some depth, the process exits 0,
 * and shallow nesting (a logger that calls the client) keeps working.
 */
final class NestingTest extends HttpTestCase
{
    /** @return iterable<string,array{bool}> */
    public static function stacks(): iterable
    {
        yield "the thread's stack" => [false];
        yield "a Fiber's own (2 MiB)" => [true];
    }

    /** @dataProvider stacks */
    public function testOneHundredThousandNestedCallsEndWithAClearException(bool $inAFiber): void
    {
        $key = $this->up->key('nest');
        $this->up->script($key, [['status' => 200, 'body' => 'ok']]);
        $base = $this->up->base($key);
        $code = <<<PHP
            \$depth = 0;
            \$deepest = 0;
            \$c = null;
            \$c = new Resilient\\Client('nest', [
                'base_url' => '$base',
                'on_attempt' => function (array \$a) use (&\$c, &\$depth, &\$deepest): void {
                    \$depth++;
                    \$deepest = max(\$deepest, \$depth);
                    if (\$depth < 100000) {
                        \$c->get('/deeper');
                    }
                    \$depth--;
                },
            ]);
            try {
                \$c->get('/top');
                echo json_encode(['error' => null, 'deepest' => \$deepest]);
            } catch (RuntimeException \$e) {
                echo json_encode(['class' => get_class(\$e), 'error' => \$e->getMessage(), 'deepest' => \$deepest,
                    'after' => (new Resilient\\Client('nest2', ['base_url' => '$base']))->get('/after')->body()]);
            }
            PHP;
        if ($inAFiber) {
            $code = '$f = new Fiber(function () { ' . $code . ' }); $f->start();';
        }
        $r = PhpProcess::code($code)->wait(120.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertNull($r->signal);
        $out = $r->json();
        $this->assertSame('RuntimeException', $out['class']);
        $this->assertStringContainsString('calls nested too deeply', $out['error']);
        $this->assertGreaterThan(50, $out['deepest'], 'ordinary nesting is allowed');
        $this->assertLessThan(100000, $out['deepest']);
        $this->assertSame('ok', $out['after'], 'the client works after the refusal');
    }

    /**
     * A Fiber runs on a stack of its own, outside the thread's: calls there were refused as
     * "nested too deeply, 0 KiB left". They work as anywhere else (pool() too).
     */
    public function testCallsInsideAFiberWork(): void
    {
        $key = $this->up->key('nest-fiber');
        $this->up->script($key, [['status' => 200, 'body' => 'ok']], 'repeat_last');
        $client = $this->client($key, ['max_attempts' => 1]);
        $fiber = new \Fiber(function () use ($client): array {
            $one = $client->get('/x')->body();
            \Fiber::suspend($one);
            return array_map(fn ($r) => $r->body(), $client->pool(['a' => ['GET', '/a'], 'b' => ['GET', '/b']], 2));
        });
        $this->assertSame('ok', $fiber->start());
        $fiber->resume();
        $this->assertSame(['a' => 'ok', 'b' => 'ok'], $fiber->getReturn());
        $this->assertCount(3, $this->up->attempts($key, 3));
    }
}
