<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Funnel;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * 16 background CLI processes on Funnel(limit 4, reserve 1) for 20 s while workers are killed
 * with SIGKILL and paused with SIGSTOP at random; from the middle of the run 4 web callers join.
 * An independent observer (tests/fixtures/cli/funnel_chaos.php) never sees more than 3
 * background holders at once, nor more than 4 holders in all, and nothing is held at the end.
 */
final class FunnelChaosTest extends TestCase
{
    private const LIMIT = 4;
    private const RESERVE = 1;
    private const BACKGROUND = 16;
    private const WEB = 4;
    private const SECONDS = 20.0;

    /** @var array<int, PhpProcess> worker index => process */
    private array $workers = [];

    public function testNoInterleavingOfKillsAndStopsLetsTooManyIn(): void
    {
        $name = Run::name('chaos');
        $dir = Run::tempDir('chaos');
        $observerFile = "$dir/observer";
        file_put_contents($observerFile, str_repeat("\0", 26));
        $observer = fopen($observerFile, 'c+');
        $start = fn (int $i) => $this->workers[$i] = PhpProcess::script('funnel_chaos.php', [
            $name, self::LIMIT, self::RESERVE, $i < 16 ? 'background' : 'web', $observerFile, $i, $dir,
        ]);

        for ($i = 0; $i < self::BACKGROUND; $i++) {
            $start($i);
        }
        $kills = $stops = 0;
        $began = microtime(true);
        $webJoined = false;
        mt_srand(7);
        while (($elapsed = microtime(true) - $began) < self::SECONDS) {
            if (!$webJoined && $elapsed >= self::SECONDS / 2) {
                for ($i = 16; $i < 16 + self::WEB; $i++) {
                    $start($i);
                }
                $webJoined = true;
            }
            usleep(mt_rand(20_000, 80_000));
            $i = array_rand($this->workers);
            $victim = $this->workers[$i];
            if (mt_rand(0, 2) === 0) {
                // Kill: under the observer's lock, so no worker records while the victim's byte
                // is stale; clear it once the victim is gone, then start a replacement.
                flock($observer, LOCK_EX);
                $victim->signal(SIGKILL);
                $victim->wait(10);
                fseek($observer, $i);
                fwrite($observer, "\0");
                fflush($observer);
                flock($observer, LOCK_UN);
                $start($i);
                $kills++;
            } else {
                $victim->signal(SIGSTOP);
                usleep(mt_rand(1_000, 200_000));
                $victim->signal(SIGCONT);
                $stops++;
            }
        }

        touch("$dir/stop");
        foreach ($this->workers as $w) {
            $w->signal(SIGCONT);
        }
        $acquired = 0;
        foreach ($this->workers as $w) {
            $r = $w->wait(30);
            $this->assertSame(0, $r->exitCode, $r->describe());
            $acquired += (int) (preg_match('/acquired (\d+)/', $r->stdout, $m) ? $m[1] : 0);
        }
        $bytes = file_get_contents($observerFile);
        $maxBackground = ord($bytes[24]);
        $maxTotal = ord($bytes[25]);
        $inFlight = (new Funnel($name, limit: self::LIMIT, reserve: self::RESERVE))->inFlight();
        fwrite(STDERR, sprintf(
            "\n[funnel chaos] %d+%d workers, %.0f s, %d SIGKILL, %d SIGSTOP: %d leases by the survivors; "
            . "max holders seen: %d background (cap %d), %d in all (limit %d); in flight at the end: %d\n",
            self::BACKGROUND, self::WEB, self::SECONDS, $kills, $stops, $acquired,
            $maxBackground, self::LIMIT - self::RESERVE, $maxTotal, self::LIMIT, $inFlight,
        ));

        $this->assertLessThanOrEqual(self::LIMIT - self::RESERVE, $maxBackground, 'background callers took a reserved slot');
        $this->assertLessThanOrEqual(self::LIMIT, $maxTotal, 'more holders than the limit');
        // The run contended the funnel, or the bounds above prove nothing.
        $this->assertSame(self::LIMIT - self::RESERVE, $maxBackground, 'background callers never filled their share');
        $this->assertSame(self::LIMIT, $maxTotal, 'web callers never filled the reserve');
        $this->assertGreaterThan(10, $kills);
        $this->assertSame(0, $inFlight, 'slots still held after every worker ended');
    }
}
