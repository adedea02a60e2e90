<?php

declare(strict_types=1);

namespace Resilient\Tests\Shm;

use Resilient\Funnel;
use Resilient\FunnelFull;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The funnel's `share` option: under contention web callers keep the reserved slots and
 * background callers get the others; without it the web takes every
 * slot it can (the default, interactive first). Explicit `$background` in one process, then
 * real processes: two web-context CLI processes (resilient.context=web) that want every slot
 * and one background CLI process.
 */
final class FunnelShareTest extends TestCase
{
    public function testTheSplitThroughFunnel(): void
    {
        $f = new Funnel(Run::name('share'), 4, 2, 30.0, true);
        $this->assertTrue($f->share());
        $this->assertTrue($f->stats()['share']);
        $web = [];
        for ($i = 0; $i < 4; $i++) {
            $web[] = $f->tryAcquire(background: false);
        }
        $this->assertNotContains(null, $web, 'without background demand the web may fill all 4');
        $this->assertNull($f->tryAcquire(background: true), 'the background is refused (its demand is recorded)');
        array_pop($web)->release();
        array_pop($web)->release();
        $this->assertNull($f->tryAcquire(background: false), 'the web keeps to the 2 reserved slots while the background wants the others');
        $bg = [$f->tryAcquire(background: true), $f->tryAcquire(background: true)];
        $this->assertNotContains(null, $bg, 'the background gets the 2 unreserved slots');
        array_pop($web)->release();
        $this->assertNull($f->tryAcquire(background: true), 'a third background caller: at most limit - reserve');
        $this->assertNotNull($back = $f->tryAcquire(background: false), 'the web takes its reserved slot back');
        $this->assertSame(4, $f->inFlight());
        foreach ($bg as $l) {
            $l->release();
        }
        usleep(150_000); // the demand lapses 100 ms after the last background refusal
        $this->assertNotNull($a = $f->tryAcquire(background: false), 'the web may use any free slot again');
        $this->assertNotNull($b = $f->tryAcquire(background: false));
        $this->assertSame(4, $f->inFlight());
    }

    public function testShareIsOffByDefaultAndNeedsAReserve(): void
    {
        $f = new Funnel(Run::name('noshare'), 4, 2);
        $this->assertFalse($f->share());
        $this->assertFalse($f->stats()['share']);
        $web = [];
        for ($i = 0; $i < 4; $i++) {
            $web[] = $f->tryAcquire(background: false);
        }
        $this->assertNull($f->tryAcquire(background: true));
        array_pop($web)->release();
        array_pop($web)->release();
        $this->assertNotNull($again = $f->tryAcquire(background: false), 'interactive first: the web refills at once');

        try {
            new Funnel(Run::name('noreserve'), 4, 0, null, true);
            $this->fail('share without a reserve was accepted');
        } catch (\ValueError $e) {
            $this->assertSame('share: needs a reserve ≥ 1: the slots web callers keep', $e->getMessage());
        }
    }

    /** With no reserve a background caller is refused at the limit: nothing is kept for web callers. */
    public function testARefusalWithoutAReserveKeepsNothingForWebCallers(): void
    {
        $name = Run::name('no-reserve-why');
        $f = new Funnel($name, 2, 0, 30.0);
        $held = [$f->tryAcquire(), $f->tryAcquire()];
        $this->assertRefusedInTheBackground($f, "funnel '$name' is full (2 of 2 slots in flight; background callers may hold 2)");
        foreach ($held as $l) {
            $l->release();
        }
    }

    /** `run()` from this CLI process (a background caller) is refused with `$message`. */
    private function assertRefusedInTheBackground(Funnel $f, string $message): void
    {
        try {
            $f->run(fn () => 1);
            $this->fail('the funnel is full');
        } catch (FunnelFull $e) {
            $this->assertSame($message, $e->getMessage());
        }
    }

    /** A refusal says which part the caller was kept to, and why. */
    public function testTheRefusalSaysWhichPartTheCallerWasKeptTo(): void
    {
        $name = Run::name('share-why');
        $f = new Funnel($name, 4, 2, 30.0, true);
        $held = [];
        for ($i = 0; $i < 4; $i++) {
            $held[] = $f->tryAcquire(background: false);
        }
        $this->assertRefusedInTheBackground($f, "funnel '$name' is full (4 of 4 slots in flight; background callers may hold 2, the rest is kept for web callers)");
        foreach ($held as $l) {
            $l->release();
        }

        // A web process, in the 100 ms a background refusal keeps web callers to the reserve
        // (another name: the refusal above keeps this one's web callers to it for 100 ms).
        $name = Run::name('share-why-web');
        $code = sprintf(<<<'PHP'
            $f = new Resilient\Funnel(%s, 4, 2, 30.0, true);
            $held = [];
            for ($i = 0; $i < 4; $i++) {
                $held[] = $f->tryAcquire(background: false);
            }
            $f->tryAcquire(background: true);
            array_pop($held)->release();
            array_pop($held)->release();
            try {
                $f->run(fn () => 1);
                echo 'admitted';
            } catch (Resilient\FunnelFull $e) {
                echo $e->getMessage();
            }
            PHP, var_export($name, true));
        $p = PhpProcess::code($code, ['resilient.context' => 'web'])->wait(10.0);
        $this->assertSame(0, $p->exitCode, $p->describe());
        $this->assertSame("funnel '$name' is full (2 of 4 slots in flight; background callers were refused just now, so web callers keep to their 2 reserved)", $p->stdout);
    }

    /**
     * `share` works on either backend (on Redis: crates/redis/tests/redis_backend.rs); a learned
     * limit lives in each host's shared memory, so with the Redis backend from the ini it is
     * refused rather than silently becoming its `max`.
     */
    public function testALearnedLimitIsRefusedWithTheRedisBackendFromIni(): void
    {
        $code = <<<'PHP'
            new Resilient\Client('share-redis', ['funnel' => ['limit' => 4, 'reserve' => 2, 'share' => true]]);
            try {
                new Resilient\Client('auto-redis', ['funnel' => ['limit' => 'auto']]);
                echo "accepted";
            } catch (\ValueError $e) {
                echo $e->getMessage();
            }
            new Resilient\Client('auto-redis', ['funnel' => ['limit' => 'auto'], 'backend' => 'shm']);
            PHP;
        $r = PhpProcess::runCode($code, ['resilient.backend' => 'redis://127.0.0.1:1']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame("option 'funnel.limit': 'auto' is not available with the redis backend (a learned limit lives in each host's shared memory); give a number", $r->stdout);
    }

    /**
     * @return array{web: array, other: array, background: array}
     */
    private function contend(bool $share): array
    {
        $name = Run::name($share ? 'share-p' : 'noshare-p');
        $dir = Run::tempDir('share');
        $state = fn (string $tag) => is_file("$dir/$tag.json") ? json_decode(file_get_contents("$dir/$tag.json"), true) : null;
        $web = ['resilient.context' => 'web'];
        $s = $share ? '1' : '0';

        // A web process fills the funnel, a second one wants every slot too.
        $procs = [PhpProcess::script('share_worker.php', [$name, $s, 4, $dir, 'web'], $web)];
        $this->waitFor(fn () => ($state('web')['held'] ?? 0) === 4, 15, 'the web process to hold 4');
        $procs[] = PhpProcess::script('share_worker.php', [$name, $s, 4, $dir, 'other'], $web);
        $this->waitFor(fn () => ($state('other')['refused'] ?? 0) > 0, 15, 'the second web process to be refused');
        // A background (console) worker wants 2 and is refused.
        $procs[] = PhpProcess::script('share_worker.php', [$name, $s, 2, $dir, 'background']);
        $this->waitFor(fn () => ($state('background')['refused'] ?? 0) > 0, 15, 'the background worker to be refused');

        // The first web process gives back 2 slots; who gets them?
        touch("$dir/drop-web");
        $this->waitFor(
            fn () => ($state('background')['held'] ?? 0) + ($state('other')['held'] ?? 0) === 2,
            15,
            'the 2 freed slots to be taken',
        );
        usleep(150_000);
        $during = ['web' => $state('web'), 'other' => $state('other'), 'background' => $state('background')];
        $inFlight = (new Funnel($name, 4, 2, 30.0, $share))->inFlight();

        if ($share) {
            // The background stops wanting: its demand lapses and the web may use its slots.
            touch("$dir/end-background");
            $this->waitFor(fn () => ($state('other')['held'] ?? 0) === 2, 15, 'the web to take the slots the background left');
        }
        foreach (['web', 'other', 'background'] as $tag) {
            touch("$dir/end-$tag");
        }
        foreach ($procs as $p) {
            $r = $p->wait(15);
            $this->assertSame(0, $r->exitCode, $r->describe());
        }
        $this->assertSame(4, $inFlight);
        $this->assertSame(0, (new Funnel($name, 4, 2))->inFlight());
        return $during;
    }

    public function testWithShareTheBackgroundGetsItsSlotsAcrossProcesses(): void
    {
        $during = $this->contend(true);
        $this->assertSame(2, $during['web']['held']);
        $this->assertSame(2, $during['background']['held'], 'the background worker gets the 2 unreserved slots: ' . json_encode($during));
        $this->assertSame(0, $during['other']['held'], 'the web, still wanting more, is kept to the reserve: ' . json_encode($during));
    }

    public function testWithoutShareTheWebTakesThemAcrossProcesses(): void
    {
        $during = $this->contend(false);
        $this->assertSame(2, $during['other']['held'], 'interactive first: ' . json_encode($during));
        $this->assertSame(0, $during['background']['held'], json_encode($during));
    }
}
