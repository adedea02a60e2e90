<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\FpmMaster;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * A `.user.ini` sets resilient.* for the requests of its folder only, under real php-fpm: one
 * worker serves folder `a` (with the `.user.ini`) and folder `b` (without) in turn, and what
 * `a`'s file said, refused or accepted, never follows the worker into `b`'s requests.
 */
final class UserIniTest extends TestCase
{
    private ?ServiceProcess $fpm = null;
    private string $dir;

    protected function tearDown(): void
    {
        $this->fpm?->stop();
    }

    /** One pool of one worker (every request on the same process); `a/.user.ini` holds `$userIni`. */
    private function start(string $userIni, array $poolValues = []): void
    {
        $this->dir = Run::tempDir('user-ini');
        $script = <<<'PHP'
            <?php
            header('Content-Type: application/json');
            $out = ['pid' => getmypid(), 'ini' => ini_get('resilient.web_timeout')];
            try {
                new Resilient\Client('user-ini');
                $out['client'] = 'made';
            } catch (\Throwable $e) {
                $out['client'] = get_class($e) . ': ' . $e->getMessage();
            }
            try {
                $out['timeout_30'] = Resilient\Context::timeout(30.0);
            } catch (\Throwable $e) {
                $out['timeout_30'] = get_class($e) . ': ' . $e->getMessage();
            }
            echo json_encode($out);
            PHP;
        foreach (['a', 'b'] as $folder) {
            mkdir("{$this->dir}/docs/$folder", 0777, true);
            file_put_contents("{$this->dir}/docs/$folder/index.php", $script);
        }
        file_put_contents("{$this->dir}/docs/a/.user.ini", $userIni . "\n");
        $this->fpm = FpmMaster::start(
            $this->dir,
            ['one' => ['workers' => 1, 'values' => $poolValues]],
            Run::shmPath('user-ini-' . bin2hex(random_bytes(3))),
        );
        $this->waitFor(fn () => file_exists("{$this->dir}/one.sock") ?: null, 15.0, 'the pool socket');
    }

    /** @param array<string,string> $env more FastCGI parameters (`PHP_VALUE`) */
    private function call(string $folder, array $env = []): array
    {
        $body = Fcgi::get(
            "{$this->dir}/one.sock",
            "{$this->dir}/docs/$folder/index.php",
            env: ['DOCUMENT_ROOT' => "{$this->dir}/docs"] + $env,
        );
        $data = json_decode($body, true);
        $this->assertIsArray($data, "$folder: $body\n" . @file_get_contents("{$this->dir}/fpm-error.log"));
        return $data;
    }

    public function testARefusedValueInOneFoldersUserIniStaysInThatFolder(): void
    {
        $this->start('resilient.web_timeout = abc');
        $before = $this->call('b');
        $this->assertSame('made', $before['client']);
        $this->assertEquals(10.0, $before['timeout_30']);

        $a = $this->call('a');
        $this->assertSame($before['pid'], $a['pid'], 'one worker serves both folders');
        $this->assertStringContainsString("resilient.web_timeout: must be", $a['client']);
        $this->assertStringContainsString("got 'abc'", $a['client']);

        $after = $this->call('b');
        $this->assertSame($before['pid'], $after['pid']);
        $this->assertSame('made', $after['client'], "folder a's refused value followed the worker into folder b");
        $this->assertEquals(10.0, $after['timeout_30']);
    }

    public function testAGoodValueInOneFoldersUserIniDoesNotHideThePoolsRefusedOne(): void
    {
        $this->start('resilient.web_timeout = 5', ['resilient.web_timeout' => 'abc']);
        $this->assertStringContainsString("got 'abc'", $this->call('b')['client']);

        $a = $this->call('a');
        $this->assertSame('made', $a['client'], "folder a's own good value stands in its requests");
        $this->assertEquals(5.0, $a['timeout_30']);

        $after = $this->call('b');
        $this->assertSame($a['pid'], $after['pid'], 'one worker serves both folders');
        $this->assertStringContainsString("got 'abc'", $after['client'], "the pool's refused value went silent after folder a's request");
    }

    /**
     * A value sent with one request as a FastCGI parameter (`PHP_VALUE`, `PHP_ADMIN_VALUE`:
     * nginx's `fastcgi_param`) and refused counts for that request only: it made every later
     * request of the worker throw, though they did not send it and the engine had kept the
     * configured value.
     */
    public function testARefusedPhpValueSentWithOneRequestStaysInThatRequest(): void
    {
        $this->start('; nothing');
        foreach (['PHP_VALUE', 'PHP_ADMIN_VALUE'] as $param) {
            $bad = $this->call('b', [$param => 'resilient.web_timeout=abc']);
            $this->assertStringContainsString("resilient.web_timeout: must be", $bad['client'], $param);
            $this->assertStringContainsString("got 'abc' (from php.ini, -d, the FPM pool, .user.ini or a FastCGI PHP_VALUE)", $bad['client'], $param);

            $after = $this->call('b');
            $this->assertSame($bad['pid'], $after['pid'], 'one worker serves both requests');
            $this->assertSame('made', $after['client'], "$param: the refused value followed the worker into the next request");
            $this->assertEquals(10.0, $after['timeout_30'], $param);
        }
    }
}
