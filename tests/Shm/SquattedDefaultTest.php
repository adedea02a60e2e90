<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * A squatted default segment: another local user pre-creates the default segment of a victim
 * (/dev/shm/resilient-<uid>.v8.shm; /dev/shm is sticky, so the victim cannot remove it). Every
 * Funnel and every Client with a budget used to throw SharedMemoryError. Now the victim's
 * process keeps working with process-local guards and says so once in PHP's error log.
 *
 * The victim is uid 1 ("daemon") running the real default path (resilient.shm_path empty); the
 * squatter is "nobody". Needs root (setpriv, chown).
 */
final class SquattedDefaultTest extends TestCase
{
    private const VICTIM_UID = 1;

    private string $squatted;
    private string $log;
    private ?ServiceProcess $web = null;

    protected function setUp(): void
    {
        $this->needSetpriv();
        $this->squatted = '/dev/shm/resilient-' . self::VICTIM_UID . '.v8.shm';
        clearstatcache();
        if (is_file($this->squatted) && fileowner($this->squatted) === 65534 && filesize($this->squatted) === 0) {
            // This test's own squat, left by a run cut short before tearDown (the victim's
            // real segment would be the victim's, and never empty).
            unlink($this->squatted);
        }
        if (file_exists($this->squatted)) {
            $this->markTestSkipped("{$this->squatted} exists already; not touching it");
        }
        // What the squatter does: its own file, at the victim's default path.
        touch($this->squatted);
        chown($this->squatted, 'nobody');
        $this->log = tempnam(sys_get_temp_dir(), 'resilient-squat-log-');
        chown($this->log, self::VICTIM_UID);
    }

    protected function tearDown(): void
    {
        $this->web?->stop();
        if (isset($this->squatted) && is_file($this->squatted) && fileowner($this->squatted) === 65534) {
            unlink($this->squatted);
        }
        if (isset($this->log)) {
            @unlink($this->log);
        }
    }

    /** @return iterable<string,array{int}> */
    public static function squatModes(): iterable
    {
        yield 'unreadable to the victim (0644)' => [0644];
        yield 'writable by the victim (0666)' => [0666];
    }

    /** @dataProvider squatModes */
    public function testVictimWorksInDegradedModeAndSaysSoOnce(int $mode): void
    {
        chmod($this->squatted, $mode);
        // A plain upstream for the victim's Client.
        $port = Run::freePort();
        $docroot = Run::tempDir('squat-web');
        file_put_contents("$docroot/index.php", '<?php echo "ok";');
        $this->web = ServiceProcess::start(['php8.2', '-n', '-S', "127.0.0.1:$port", '-t', $docroot], "$docroot/server");
        $this->waitFor(fn () => @fsockopen('127.0.0.1', $port) ? [true] : null, 5.0, 'php -S to listen');

        $code = sprintf('
            $c = new Resilient\Client("squat", ["base_url" => "http://127.0.0.1:%d", "funnel" => ["limit" => 2], "budget" => ["ratio" => 0.1, "floor" => 1, "window" => 10]]);
            $bodies = [];
            for ($i = 0; $i < 3; $i++) { $bodies[] = $c->get("/index.php")->body(); }
            $f = new Resilient\Funnel("squat-f", limit: 1);
            $l = $f->tryAcquire(background: false);
            $b = new Resilient\RetryBudget("squat-b");
            return ["uid" => posix_geteuid(), "bodies" => $bodies, "funnel_degraded" => $f->isDegraded(), "second" => $f->tryAcquire(background: false) !== null,
                "budget" => $b->stats()["degraded"], "reason" => Resilient\Funnel::degradedReason()];', $port);
        [$rc, $stdout, $stderr] = $this->phpAs(self::VICTIM_UID, ['-d', 'resilient.shm_path=', '-d', 'log_errors=1', '-d', "error_log={$this->log}",
            Run::root() . '/tests/fixtures/cli/expect_throw.php', $code]);
        $this->assertSame(0, $rc, "stdout: $stdout\nstderr: $stderr");
        $out = json_decode($stdout, true);
        $this->assertIsArray($out, "stdout: $stdout\nstderr: $stderr");
        $this->assertFalse($out['threw'], $stdout);
        $v = $out['returned'];
        $this->assertSame(self::VICTIM_UID, $v['uid']);
        $this->assertSame(['ok', 'ok', 'ok'], $v['bodies'], 'the Client with a funnel and a budget must work');
        $this->assertTrue($v['funnel_degraded']);
        $this->assertFalse($v['second'], 'the local funnel still limits this process');
        $this->assertTrue($v['budget']);
        $this->assertStringContainsString($this->squatted, $v['reason']);
        $this->assertStringContainsString('owned by uid 65534', $v['reason']);

        $log = (string) file_get_contents($this->log);
        $this->assertSame(1, substr_count($log, 'falling back to process-local guards'), $log);
        $this->assertSame(1, substr_count($log, "\n"), "one line, nothing else: $log");
        $this->assertSame(65534, fileowner($this->squatted), 'the squatter\'s file is left alone');
        fwrite(STDERR, "\n[squatted default] " . trim($log) . "\n");
    }
}
