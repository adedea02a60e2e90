<?php

declare(strict_types=1);

namespace Resilient\Tests\Context;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * Octane serves web requests from a `cli` process: `resilient.context = web` (or a client's
 * `'context' => 'web'`) makes it a web caller (web caps, reserved funnel slots), and
 * `console` the reverse. Measured in a child CLI process: attempts a client made against a
 * closed port (web: 1, the web cap; console: 3) and funnel slots it could take (limit 2,
 * reserve 1: web callers get both, background callers one).
 */
final class ContextOverrideTest extends TestCase
{
    private const PROBE = <<<'PHP'
        $ctx = $argv[1] ?? null;
        $attempts = 0;
        $options = ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 3, 'budget' => false,
            'backoff' => ['base' => 0.001, 'cap' => 0.002], 'on_attempt' => function () use (&$attempts) { $attempts++; }];
        if ($ctx !== null) { $options['context'] = $ctx; }
        try { (new Resilient\Client('ctx-probe', $options))->get('/'); } catch (Resilient\UpstreamFailed $e) {}
        $funnel = new Resilient\Funnel('ctx-' . getmypid(), 2, 1);
        $leases = array_filter([$funnel->tryAcquire(), $funnel->tryAcquire()]);
        echo json_encode(['web' => Resilient\Context::isWeb(), 'attempts' => $attempts, 'slots' => count($leases)]);
        PHP;

    private function probe(array $ini, ?string $clientContext = null): array
    {
        $code = $clientContext === null ? self::PROBE : str_replace('$argv[1] ?? null', var_export($clientContext, true), self::PROBE);
        $r = PhpProcess::runCode($code, $ini + ['resilient.shm_path' => Run::shmPath('ctx')]);
        $this->assertSame(0, $r->exitCode, $r->stdout . $r->stderr);

        return json_decode($r->stdout, true, 512, JSON_THROW_ON_ERROR);
    }

    public function testTheSapiDecidesByDefault(): void
    {
        $this->assertSame(['web' => false, 'attempts' => 3, 'slots' => 1], $this->probe([]));
        $this->assertSame(['web' => false, 'attempts' => 3, 'slots' => 1], $this->probe(['resilient.context' => 'auto']));
    }

    public function testTheIniMakesACliProcessAWebCaller(): void
    {
        $this->assertSame(['web' => true, 'attempts' => 1, 'slots' => 2], $this->probe(['resilient.context' => 'web']));
    }

    public function testAClientOptionDecidesForThatClient(): void
    {
        $web = $this->probe([], 'web');
        $this->assertSame([false, 1], [$web['web'], $web['attempts']], 'the client is web; the process is not');
        $console = $this->probe(['resilient.context' => 'web'], 'console');
        $this->assertSame([true, 3], [$console['web'], $console['attempts']]);
    }

    public function testABadValueIsRefusedByName(): void
    {
        $r = PhpProcess::runCode(
            'var_export(ini_set("resilient.context", "octane")); echo " ", ini_get("resilient.context"), " ";'
            . 'try { new Resilient\Client("x", ["context" => "server"]); } catch (\ValueError $e) { echo $e->getMessage(); }',
            ['resilient.shm_path' => Run::shmPath('ctx')],
        );
        $this->assertSame("false auto option 'context': must be 'web', 'console' or 'auto', got 'server'", $r->stdout);
    }

    /** The option takes a value as `resilient.context` does: any case, spaces around, empty for auto. */
    public function testTheOptionIsSpelledAsTheIniSetting(): void
    {
        $this->assertSame(1, $this->probe([], 'WEB')['attempts'], 'web: the web cap of 1 attempt');
        $this->assertSame(3, $this->probe(['resilient.context' => 'web'], ' Console ')['attempts']);
        $this->assertSame(3, $this->probe([], '')['attempts'], 'empty: the SAPI (cli) decides');
    }
}
