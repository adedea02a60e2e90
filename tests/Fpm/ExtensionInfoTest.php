<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Laravel\Console\ExtensionInfo;
use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\TestCase;

require_once __DIR__ . '/../../php/autoload.php';

/**
 * The Laravel commands read what `php --ri resilient` shows (the layout version, the masked
 * `resilient.backend`) through `ExtensionInfo`. Under FPM the extension's info is HTML, which
 * read as nothing: `resilient:doctor` called from a web request then printed the raw
 * `resilient.backend`, a Redis password with it. Read under real php-fpm, the same words as
 * the CLI's.
 */
final class ExtensionInfoTest extends TestCase
{
    public function testAWebRequestReadsTheSameRowsAsTheCli(): void
    {
        $names = ['Shared-memory layout version', 'resilient.shm_path', 'resilient.backend', 'no such row'];
        $cli = array_combine($names, array_map(ExtensionInfo::value(...), $names));
        $this->assertNotNull($cli['Shared-memory layout version']);
        $this->assertNotNull($cli['resilient.backend']);
        $this->assertNull($cli['no such row']);

        $web = FpmServer::shared()->getJson('/?' . http_build_query(['do' => 'extension_info', 'names' => $names]));
        $this->assertSame('fpm-fcgi', $web['sapi']);
        $this->assertSame($cli, $web['values'], 'the rows as the CLI reads them');
    }
}
