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
    /** @return iterable<string,array{0: bool, 1?: string}> */
    public static function stacks(): iterable
    {
        yield "the thread's stack" => [false];
        yield "a Fiber's own (2 MiB)" => [true];
        // A stack that takes a call but few levels: the refusal still says nesting.
        yield 'a Fiber of 256K' => [true, '256K'];
    }

    /** @dataProvider stacks */
    public function testOneHundredThousandNestedCallsEndWithAClearException(bool $inAFiber, ?string $fiberStack = null): void
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
        $r = PhpProcess::code($code, $fiberStack === null ? [] : ['fiber.stack_size' => $fiberStack])->wait(120.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertNull($r->signal);
        $out = $r->json();
        $this->assertSame('RuntimeException', $out['class']);
        $this->assertStringContainsString('calls nested too deeply', $out['error']);
        $this->assertGreaterThan($fiberStack === null ? 50 : 1, $out['deepest'], 'ordinary nesting is allowed');
        $this->assertLessThan(100000, $out['deepest']);
        $this->assertSame('ok', $out['after'], 'the client works after the refusal');
    }

    /**
     * A call runs the HTTP stack (hyper, rustls) on the caller's stack. In a Fiber whose stack
     * is smaller than that needs (`fiber.stack_size` 24K, 64K) the call is refused with a
     * RuntimeException naming the setting, where it overflowed into the guard page (SIGSEGV):
     * the quarter of the stack kept free was less than one call needs. In 256K it is made.
     */
    public function testACallInAFiberWhoseStackIsTooSmallIsRefusedNotACrash(): void
    {
        $key = $this->up->key('nest-small-fiber');
        $this->up->script($key, [['status' => 200, 'body' => 'ok']], 'repeat_last');
        $base = $this->up->base($key);
        $code = '$f = new Fiber(fn () => (new Resilient\\Client("small-fiber", ["base_url" => "' . $base . '", "max_attempts" => 1]))->get("/x")->body());'
            . ' try { $f->start(); echo json_encode(["body" => $f->getReturn()]); }'
            . ' catch (RuntimeException $e) { echo json_encode(["class" => get_class($e), "error" => $e->getMessage()]); }';
        foreach (['24K', '64K'] as $size) {
            $r = PhpProcess::code($code, ['fiber.stack_size' => $size])->wait(30.0);
            $this->assertSame(0, $r->exitCode, "$size: " . $r->describe());
            $out = $r->json();
            $this->assertSame('RuntimeException', $out['class'] ?? null, "$size: " . json_encode($out));
            $this->assertStringContainsString('too small for a call (fiber.stack_size:', $out['error']);
            $this->assertStringContainsString('at least 192 KiB', $out['error']);
        }
        $r = PhpProcess::code($code, ['fiber.stack_size' => '256K'])->wait(30.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame(['body' => 'ok'], $r->json());
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
