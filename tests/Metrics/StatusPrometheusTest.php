<?php

declare(strict_types=1);

namespace Resilient\Tests\Metrics;

require_once dirname(__DIR__) . '/Laravel/support/FixtureApp.php';

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;
use Resilient\Tests\Laravel\FixtureApp;

/**
 * The exposition path with Laravel: `php artisan resilient:status --prometheus` in the fixture
 * app prints `Resilient\Metrics::prometheus()` of the app's segment (counters another process
 * wrote) and exits 0; the text passes `promtool check metrics`.
 */
final class StatusPrometheusTest extends TestCase
{
    public static function tearDownAfterClass(): void
    {
        FixtureApp::stopRedis();
    }

    public function testArtisanStatusPrometheusPrintsTheExposition(): void
    {
        $app = new FixtureApp();
        $name = Run::name('metrics-artisan');
        $w = $app->php("Resilient\\Metrics::recordSynthetic('$name', 4, 0.003);")->wait(10.0);
        $this->assertSame(0, $w->exitCode, $w->describe());

        $r = $app->artisan(['resilient:status', '--prometheus']);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString("resilient_originals_total{upstream=\"$name\"} 4\n", $r->stdout);
        $this->assertStringContainsString("resilient_attempt_duration_seconds_bucket{upstream=\"$name\",outcome=\"success\",le=\"0.005\"} 4\n", $r->stdout);

        $file = Run::tempDir('promtool') . '/artisan.prom';
        file_put_contents($file, $r->stdout);
        exec('promtool check metrics < ' . escapeshellarg($file) . ' 2>&1', $out, $rc);
        $this->assertSame(0, $rc, implode("\n", $out));
    }

    /** An unusable segment: exit 2 with the reason, as resilient:status without the flag. */
    public function testAnUnusableSegmentIsExitTwoNotThisProcesssCounters(): void
    {
        $app = new FixtureApp();
        $path = $app->ini()['resilient.shm_path'];
        file_put_contents($path, random_bytes(4096));
        chmod($path, 0600);

        $r = $app->artisan(['resilient:status', '--prometheus']);
        $this->assertSame(2, $r->exitCode, $r->describe());
        $this->assertStringNotContainsString('resilient_', $r->stdout);
        $this->assertStringContainsString('segment unusable', $r->stdout . $r->stderr);
        $this->assertStringContainsString($path, $r->stdout . $r->stderr);
    }
}
