<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * With `zend.exception_ignore_args=0` (PHP's built-in default, php.ini-development's) the frames
 * of an exception's trace keep their arguments, which error trackers collect and send off the
 * host. The extension's parameters that carry secrets (options, paths, query strings, bodies,
 * headers, a pool's requests) are `#[\SensitiveParameter]`: their frames hold a
 * `SensitiveParameterValue` instead.
 */
final class TraceArgumentsTest extends TestCase
{
    /** @return iterable<string,array{string,string,list<int>}> code that throws, its method, the arguments hidden */
    public static function throwingCalls(): iterable
    {
        $client = '(new Resilient\\Client("t", ["base_url" => "http://u:s3cr3tPw@127.0.0.1:9"]))';
        yield 'constructor' => ['new Resilient\\Client("t", ["base_url" => "http://u:s3cr3tPw@127.0.0.1:9", "timout" => 1]);', 'Resilient\\Client::__construct', [1]];
        yield 'get' => [$client . '->get("/x?api_key=s3cr3tPw", ["q" => "s3cr3tPw"], ["headers" => ["Authorization" => "Bearer s3cr3tPw"], "timout" => 1]);', 'Resilient\\Client::get', [0, 1, 2]];
        yield 'post' => [$client . '->post("/x?api_key=s3cr3tPw", ["password" => "s3cr3tPw"], ["timout" => 1]);', 'Resilient\\Client::post', [0, 1, 2]];
        yield 'request' => [$client . '->request("GET", "/x?api_key=s3cr3tPw", ["timout" => 1, "headers" => ["X-Api-Key" => "s3cr3tPw"]]);', 'Resilient\\Client::request', [1, 2]];
        yield 'validateRequest' => [$client . '->validateRequest("GET", "/x?api_key=s3cr3tPw", ["timout" => 1]);', 'Resilient\\Client::validateRequest', [1, 2]];
        yield 'pool' => [$client . '->pool(["a" => ["GET", "/x?api_key=s3cr3tPw", ["timout" => 1]]]);', 'Resilient\\Client::pool', [0]];
        yield 'validator' => ['Resilient\\Client::validator("t", ["base_url" => "http://u:s3cr3tPw@127.0.0.1:9", "timout" => 1]);', 'Resilient\\Client::validator', [1]];
        yield 'Response::fake' => ['Resilient\\Response::fake(200, "s3cr3tPw", ["Set-Cookie" => "s3cr3tPw", "Bad Name" => "x"]);', 'Resilient\\Response::fake', [1, 2]];
    }

    /**
     * @dataProvider throwingCalls
     * @param list<int> $hidden
     */
    public function testTheArgumentsThatMayHoldSecretsAreHiddenInTraces(string $code, string $method, array $hidden): void
    {
        $r = PhpProcess::runCode(
            'try { ' . $code . ' echo "no throw"; } catch (\Throwable $e) {'
            . ' $f = $e->getTrace()[0];'
            . ' echo json_encode(["at" => ($f["class"] ?? "") . "::" . $f["function"],'
            . ' "args" => array_map(fn ($a) => is_object($a) ? get_class($a) : $a, $f["args"] ?? []),'
            . ' "trace" => $e->getTraceAsString(), "message" => $e->getMessage()]); }',
            ['resilient.shm_path' => Run::shmPath('trace-args'), 'zend.exception_ignore_args' => '0'],
        );
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = json_decode($r->stdout, true);
        $this->assertIsArray($out, $r->stdout);
        $this->assertSame($method, $out['at']);
        foreach ($hidden as $i) {
            $this->assertSame(\SensitiveParameterValue::class, $out['args'][$i] ?? null, "$method argument $i: " . json_encode($out['args']));
        }
        $this->assertStringNotContainsString('s3cr3t', json_encode($out['args']) . $out['trace'] . $out['message']);
    }
}
