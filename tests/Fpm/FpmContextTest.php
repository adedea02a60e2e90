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

    /**
     * The solo pool locks resilient.context (php_admin_value), so ini_set() of any value fails
     * there: the Laravel package judges `defaults.context` by its value, not by that failure.
     */
    public function testALockedContextSettingIsNoRefusedContext(): void
    {
        $fpm = FpmServer::shared();
        foreach (['web', ' Console ', 'auto'] as $value) {
            $ctx = $fpm->getJson('/solo/?do=declare_context&value=' . rawurlencode($value));
            $this->assertNull($ctx['problem'], "'$value'");
            $this->assertTrue($ctx['is_web'], 'the pool\'s locked value stands');
        }
        $ctx = $fpm->getJson('/solo/?do=declare_context&value=bogus');
        $this->assertSame("resilient.defaults.context (RESILIENT_CONTEXT): must be 'web', 'console' or 'auto', got 'bogus'", $ctx['problem']);
    }

    public function testWebCapFollowsTheIniSetting(): void
    {
        $ctx = FpmServer::shared()->getJson('/solo/?do=context');
        $this->assertTrue($ctx['is_web']);
        $this->assertEquals(4.0, $ctx['timeout_30'], 'the solo pool sets resilient.web_timeout = 4');
        $this->assertEquals(3.0, $ctx['connect_10']);
    }
}
