<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/FixtureApp.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * `php artisan resilient:status | resilient:check | resilient:doctor` in the fixture app, as real
 * processes: what they print and the exit codes a health check or CI acts on.
 */
final class ArtisanTest extends TestCase
{
    public static function tearDownAfterClass(): void
    {
        FixtureApp::stopRedis();
    }

    public function testStatusShowsALeaseHeldByAnotherProcess(): void
    {
        $app = new FixtureApp();
        // A CLI process is a background caller: of sap's 3 slots (1 reserved for web) it may use 2.
        $holder = $app->php('$l = (new Resilient\Funnel("sap", 3, 1))->tryAcquire(); echo $l ? "held\n" : "full\n"; sleep(60);');
        $this->assertTrue($holder->waitForOutput(fn ($o) => $o === "held\n", 10));

        $r = $app->artisan(['resilient:status', '--json']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $sap = $r->json()['names']['sap'];
        $this->assertSame(1, $sap['funnel']['in_flight']);
        $this->assertSame(['limit' => 3, 'reserve' => 1, 'background_limit' => 2], array_intersect_key($sap['funnel'], array_flip(['limit', 'reserve', 'background_limit'])));
        $this->assertFalse($sap['funnel']['full']);
        $this->assertSame(2.0, (float) $sap['budget']['allowed']);   // budgets.sap: floor 2
        $this->assertSame(0, $r->json()['names']['shipping']['funnel']['in_flight']);

        $text = $app->artisan(['resilient:status']);
        $this->assertSame(0, $text->exitCode);
        $this->assertMatchesRegularExpression('/\|\s*sap\s*\|\s*3 \(1 reserved for web\)\s*\|\s*1\s*\|/', $text->stdout);

        $holder->signal(SIGKILL);
        $holder->wait(5);
        $this->waitFor(fn () => $app->artisan(['resilient:status', '--json'])->json()['names']['sap']['funnel']['in_flight'] === 0,
            10, 'the dead holder\'s lease to be reclaimed', 0.2);
    }

    public function testStatusExitsOneWhenAFunnelIsFullOrABudgetSpent(): void
    {
        $app = new FixtureApp();
        // Interactive leases may take every slot, the reserved ones included.
        $holder = $app->php('$f = new Resilient\Funnel("sap", 3, 1); $l = [$f->tryAcquire(false), $f->tryAcquire(false), $f->tryAcquire(false)];'
            . ' echo count(array_filter($l)), "\n"; sleep(60);');
        $this->assertTrue($holder->waitForOutput(fn ($o) => $o === "3\n", 10));
        $r = $app->artisan(['resilient:status', '--json']);
        $holder->signal(SIGKILL);
        $holder->wait(5);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertFalse($r->json()['ok']);
        $this->assertSame(['funnel full: 3 of 3 in flight'], $r->json()['names']['sap']['trouble']);

        // The pricing client's budget (floor 5): with no originals, 5 retries and it is spent.
        $spend = $app->php('$b = new Resilient\RetryBudget("pricing", 0.1, 5, 60.0); $n = 0; while ($b->tryConsume()) { $n++; } echo $n;');
        $this->assertSame('5', $spend->wait(10)->stdout);
        $r = $app->artisan(['resilient:status']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertStringContainsString('retry budget spent: 5 retries of 5.0 allowed', $r->stdout);
    }

    public function testCheckFlagsEachViolationAndPassesACleanApp(): void
    {
        $clean = (new FixtureApp())->artisan(['resilient:check', '--json']);
        $this->assertSame(0, $clean->exitCode, $clean->describe());
        $this->assertSame([], $clean->json()['findings']);
        $this->assertSame(['App\\Jobs\\CallShipping', 'App\\Jobs\\HangingCall', 'App\\Jobs\\JitteredReport', 'App\\Jobs\\OutlivesTimeout', 'App\\Jobs\\SyncSap'], $clean->json()['jobs']);

        $app = new FixtureApp(['FIXTURE_PROFILE' => 'violations']);
        $r = $app->artisan(['resilient:check', '--json']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $found = [];
        foreach ($r->json()['findings'] as $f) {
            $found[substr($f['job'], strlen('App\\CheckViolations\\'))][] = $f['rule'] . ': ' . $f['message'];
        }
        ksort($found);
        $this->assertSame(['DeadlineOverTimeout', 'FixedBackoff', 'FunnelWithoutConfig', 'NoTimeoutOnShortConnection', 'RetriesInTwoLayers', 'TimeoutOverRetryAfter', 'ZeroTimeout'], array_keys($found));
        foreach ($found as $job => $messages) {
            $this->assertCount(1, $messages, "$job: " . implode("\n", $messages));
        }
        $this->assertStringStartsWith('nesting: HTTP may take 90s (erp: deadline 90s) >= $timeout 60s', $found['DeadlineOverTimeout'][0]);
        $this->assertStringStartsWith('nesting: $timeout 120s >= retry_after 90s of queue connection "redis"', $found['TimeoutOverRetryAfter'][0]);
        $this->assertStringStartsWith('nesting: no $timeout (the worker\'s 60s) >= retry_after 30s of queue connection "redis-short"', $found['NoTimeoutOnShortConnection'][0]);
        $this->assertStringStartsWith('retries in two layers: client pricing makes up to 3 attempts per run × 5 tries = 15 upstream calls per dispatch', $found['RetriesInTwoLayers'][0]);
        $this->assertStringStartsWith('fixed backoff: fixed backoff [60, 300]', $found['FixedBackoff'][0]);
        $this->assertSame('job funnel: new Funnel(\'erp\') fails at every run: client "erp" has no funnel in config/resilient.php', $found['FunnelWithoutConfig'][0]);
        $this->assertStringStartsWith('nesting: $timeout 0 (none: the worker never stops the job) and retry_after 90s of queue connection "redis"', $found['ZeroTimeout'][0]);

        $text = $app->artisan(['resilient:check']);
        $this->assertSame(1, $text->exitCode);
        $this->assertStringContainsString('7 job(s) checked, 7 violation(s).', $text->stdout);
    }

    /** The published config says `'paths' => null`: the default, app/Jobs, not nothing. */
    public function testCheckReadsAppJobsWhenThePathsAreNull(): void
    {
        $r = (new FixtureApp(['FIXTURE_PROFILE' => 'published']))->artisan(['resilient:check', '--json']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertSame(['App\\Jobs\\CallShipping', 'App\\Jobs\\HangingCall', 'App\\Jobs\\JitteredReport', 'App\\Jobs\\OutlivesTimeout', 'App\\Jobs\\SyncSap'], $r->json()['jobs']);
    }

    /** A client's settings in `defaults` count as the client runs them. */
    public function testCheckReadsEachClientOverTheDefaults(): void
    {
        $r = (new FixtureApp(['FIXTURE_PROFILE' => 'violations', 'FIXTURE_ERP_DEADLINE' => 'defaults']))->artisan(['resilient:check', '--json']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $messages = array_map(fn (array $f) => $f['message'], $r->json()['findings']);
        $this->assertNotEmpty(array_filter($messages, fn (string $m) => str_starts_with($m, 'HTTP may take 90s (erp: deadline 90s) >= $timeout 60s')), implode("\n", $messages));
    }

    /** Without `resilient.shm_path`, doctor looks at the file the extension uses. */
    public function testDoctorNamesTheSegmentTheExtensionUses(): void
    {
        $code = sprintf('require %s; echo Resilient\Laravel\Console\SegmentFiles::path(), "|", Resilient\Metrics::segmentPath();', var_export(Run::root() . '/php/autoload.php', true));
        $r = PhpProcess::code($code, ['resilient.shm_path' => ''])->wait(20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        [$doctor, $extension] = explode('|', $r->stdout);
        $this->assertSame($extension, $doctor);
        $this->assertSame(sprintf('/dev/shm/resilient-%d.v8.shm', posix_getuid()), $extension);
    }

    public function testDoctorWarnsAboutASegmentOfAnotherUser(): void
    {
        if (posix_getuid() !== 0) {
            $this->markTestSkipped('needs root to create a file owned by another user');
        }
        $app = new FixtureApp();
        $other = Run::shmPath('other-user');   // the run's cleanup removes it
        file_put_contents($other, '');
        chmod($other, 0600);
        chown($other, 'nobody');
        // The app's segment, as its first user creates it (doctor itself creates none).
        $made = PhpProcess::code('$f = new Resilient\\Funnel("x", 1); echo $f->limit();', ['resilient.shm_path' => $app->shmPath])->wait(20);
        $this->assertSame('1', $made->stdout, $made->describe());

        $r = $app->artisan(['resilient:doctor']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $out = $r->stdout . $r->stderr;
        $this->assertStringContainsString('extension  resilient ' . phpversion('resilient'), $out);
        $this->assertStringContainsString('sapi       cli → console', $out);
        $this->assertMatchesRegularExpression('~segment    ' . preg_quote($app->shmPath, '~') . ' owner root mode 0600 size \d+ bytes~', $out);
        $this->assertStringContainsString("warning: segment $other belongs to nobody (uid 65534), this process runs as root (uid 0)", $out);
        // One user, not one path: a segment of another user is refused as foreign (that side counts alone).
        $this->assertStringContainsString('run both as one user (e.g. `sudo -u www-data php artisan …`)', $out);
        $this->assertStringNotContainsString('give both the same resilient.shm_path', $out);
        $this->assertStringContainsString('client slow: timeout 30s in config, but resilient.web_timeout = 10: under php-fpm it gets 10s', $out);
    }

    /**
     * Run as root (docker exec, a deploy hook), an artisan command at a `resilient.shm_path`
     * shared with PHP-FPM creates the segment root's, mode 0600: FPM workers of another user
     * then count alone. Doctor and status, run as root, say so (before, nothing): that what root
     * creates cannot be shared, and once it did, which file and how to fix it.
     */
    public function testDoctorAndStatusRunAsRootWarnThatFpmWorkersCannotShareTheSegment(): void
    {
        if (posix_geteuid() !== 0) {
            $this->markTestSkipped('needs root');
        }
        $app = new FixtureApp();
        $r = $app->artisan(['resilient:doctor']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertStringContainsString('warning: this process runs as root: a segment it creates is root\'s (mode 0600), which FPM workers of another user cannot share', $r->stdout);
        $this->assertStringContainsString('run artisan as the FPM user (e.g. `sudo -u www-data php artisan …`)', $r->stdout);
        $r = $app->artisan(['resilient:status']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString('warning: running as root: a segment it creates cannot be shared with FPM workers of another user (see resilient:doctor)', $r->stdout);
        $this->assertFileDoesNotExist($app->shmPath);

        // A deploy step as root uses a funnel: the segment is root's, and another user's
        // process (an FPM worker as nobody here) cannot use it.
        $this->assertSame('auto 1', trim($app->artisan(['fixture:funnel-context', Run::name('warmup')])->stdout));
        $this->assertSame(0, fileowner($app->shmPath));
        $fpm = $app->php('posix_setgid(65534); posix_setuid(65534); echo Resilient\Funnel::degradedReason() === null ? "shared" : "alone";')->wait(20);
        $this->assertSame('alone', $fpm->stdout, $fpm->describe());

        $r = $app->artisan(['resilient:doctor']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertStringContainsString("warning: segment {$app->shmPath} (resilient.shm_path) is root's: FPM workers of another user cannot use it and count alone;"
            . ' stop the root processes using it, remove the file and run artisan as the FPM user (e.g. `sudo -u www-data php artisan …`)', $r->stdout);
        $r = $app->artisan(['resilient:status']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString("warning: running as root: segment {$app->shmPath} is root's, FPM workers of another user cannot use it (see resilient:doctor)", $r->stdout);
        $json = $app->artisan(['resilient:status', '--json']);
        $this->assertSame(0, $json->exitCode, $json->describe());
        $this->assertTrue($json->json()['ok'], 'JSON as before');
    }

    /**
     * RESILIENT_CONTEXT=web (an Octane worker, SAPI cli) reaches Funnel objects too, not only
     * clients: the funnel's reserve is then this process's to use.
     */
    public function testTheDeclaredContextReachesFunnelObjects(): void
    {
        $app = new FixtureApp();
        $name = Run::name('lv-ctx');
        $r = $app->artisan(['fixture:funnel-context', $name]);
        $this->assertSame('auto 1', trim($r->stdout), 'unset: the SAPI (cli) makes it a background caller ' . $r->describe());
        $r = $app->artisan(['fixture:funnel-context', $name . '-web'], ['RESILIENT_CONTEXT' => 'web']);
        $this->assertSame('web 2', trim($r->stdout), $r->describe());
    }

    /** RESILIENT_CONTEXT the extension refuses is one of doctor's problems. */
    public function testDoctorNamesARefusedContext(): void
    {
        $app = new FixtureApp();
        $said = "resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got 'bogus'";
        $r = $app->artisan(['resilient:doctor'], ['RESILIENT_CONTEXT' => 'bogus']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertStringContainsString("error: $said", $r->stdout . $r->stderr);

        // `true` reaches config as a bool (env()): refused by clients, so named here too, and
        // every funnel and budget of status is trouble, not "ok".
        $r = $app->artisan(['resilient:doctor'], ['RESILIENT_CONTEXT' => 'true']);
        $this->assertSame(1, $r->exitCode, $r->describe());
        $this->assertStringContainsString("error: resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got bool true", $r->stdout . $r->stderr);
        $status = $app->artisan(['resilient:status', '--json'], ['RESILIENT_CONTEXT' => 'true']);
        $this->assertSame(1, $status->exitCode, $status->describe());
        $this->assertStringContainsString('got bool true', implode("\n", $status->json()['names']['sap']['trouble']));
    }

    public function testConfigCacheWorksWithThePackagesConfig(): void
    {
        $app = new FixtureApp();
        $r = $app->artisan(['config:cache']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $cached = $app->storage . '/cache/config.php';
        $this->assertFileExists($cached);
        $config = require $cached;
        $this->assertArrayHasKey('resilient', $config);
        $this->assertCount(2, $config['resilient']['queue']['release_delay'], 'the fixture app\'s queue settings are cached');
        // The app runs from the cached config: the commands still see the configured upstreams.
        $status = $app->artisan(['resilient:status', '--json']);
        $this->assertSame(0, $status->exitCode, $status->describe());
        $this->assertArrayHasKey('sap', $status->json()['names']);
        $this->assertSame(0, $app->artisan(['config:clear'])->exitCode);
        $this->assertFileDoesNotExist($cached);
    }
}
