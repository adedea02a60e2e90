<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 6 (FPM part): under php-fpm, Context reports web and caps timeouts with the web ini
 * settings: defaults 10 s / 3 s in the "main" pool, resilient.web_timeout = 4 in the "solo" pool.
 */
final class FpmContextTest extends TestCase
{
    public function testFpmIsWebWithDefaultCaps(): void
    {
        $ctx = FpmServer::shared()->getJson('/?do=context');
        $this->assertSame('fpm-fcgi', $ctx['sapi']);
        $this->assertTrue($ctx['is_web']);
        $this->assertEquals(10.0, $ctx['timeout_30'], 'web timeout is capped at resilient.web_timeout (10)');
        $this->assertEquals(2.0, $ctx['timeout_2'], 'a smaller timeout passes unchanged');
        $this->assertEquals(3.0, $ctx['connect_10'], 'web connect timeout is capped at resilient.web_connect_timeout (3)');
        $this->assertEquals(1.0, $ctx['connect_1']);
        $this->assertSame(1, $ctx['max_attempts_3'], 'web requests get resilient.web_max_attempts (1): no retry');
    }

    public function testWebCapFollowsTheIniSetting(): void
    {
        $ctx = FpmServer::shared()->getJson('/solo/?do=context');
        $this->assertTrue($ctx['is_web']);
        $this->assertEquals(4.0, $ctx['timeout_30'], 'the solo pool sets resilient.web_timeout = 4');
        $this->assertEquals(3.0, $ctx['connect_10']);
    }
}
