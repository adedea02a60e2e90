<?php

declare(strict_types=1);

namespace Resilient\Tests\Fpm;

use Resilient\Tests\Harness\FpmServer;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * The FPM master loads the extension (MINIT) and forks its workers; the segment must not be
 * created there (the master runs as root in production and its file would belong to the wrong
 * user) but by the first worker that needs it, mode 0600.
 */
final class LazySegmentTest extends TestCase
{
    public function testSegmentIsCreatedByTheFirstWorkerThatNeedsItNotByTheMaster(): void
    {
        $path = Run::shmPath('lazy-' . bin2hex(random_bytes(3)));
        $fpm = new FpmServer($path, 2);
        try {
            clearstatcache();
            $this->assertFileDoesNotExist($path, 'the segment exists before any request used the extension');
            $r = $fpm->getJson('/?do=in_flight&name=lazy&limit=1');
            $this->assertSame(0, $r['in_flight'], json_encode($r));
            clearstatcache();
            $this->assertFileExists($path);
            $this->assertSame(0600, fileperms($path) & 0777);
            $this->assertSame(posix_geteuid(), fileowner($path));
        } finally {
            $fpm->stop();
        }
    }
}
