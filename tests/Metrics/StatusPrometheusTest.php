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
}
