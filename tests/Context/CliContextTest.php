<?php

declare(strict_types=1);

namespace Resilient\Tests\Context;

use Resilient\Context;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * Must show 6 (CLI part): under the CLI SAPI, Context is not web and passes values through
 * uncapped, whatever the web ini caps say. The FPM part is tests/Fpm/FpmContextTest.php.
 */
final class CliContextTest extends TestCase
{
    public function testCliIsNotWebAndIsNotCapped(): void
    {
        $this->assertFalse(Context::isWeb());
        $this->assertSame(30.0, Context::timeout(30.0));
        $this->assertSame(10.0, Context::connectTimeout(10.0));
    }

    public function testWebCapsDoNotApplyToCliEvenWhenSet(): void
    {
        $ctx = $this->runJson('probe.php', ['context'], ['resilient.web_timeout' => 4, 'resilient.web_connect_timeout' => 1]);
        $this->assertFalse($ctx['is_web']);
        $this->assertEquals(30.0, $ctx['timeout_30']);
        $this->assertEquals(10.0, $ctx['connect_10']);
        $this->assertEquals(2.0, $ctx['timeout_2']);
        $this->assertSame(3, $ctx['max_attempts_3'], 'CLI keeps its configured attempts');
    }
}
