<?php

declare(strict_types=1);

namespace Resilient\Tests\Install;

use Resilient\Tests\Harness\Fcgi;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;
use Resilient\Tests\Harness\TestCase;

/**
 * `make install` (scripts/install.sh) under DESTDIR, so the machine's PHP is not touched: the
 * extension lands in PHP's extension dir as resilient.so and mods-available/resilient.ini holds
 * only `extension=resilient`; the CLI and a php-fpm worker that read nothing but that ini (no
 * php.ini, no conf.d scan) both load it by name.
 */
final class InstallTest extends TestCase
{
    private static string $root;
    private static string $extDir;
    private static string $ini;

    public static function setUpBeforeClass(): void
    {
        self::$root = Run::tempDir('install');
        exec(sprintf('DESTDIR=%s %s/scripts/install.sh 2>&1', escapeshellarg(self::$root), escapeshellarg(Run::root())), $out, $rc);
        self::assertSame(0, $rc, implode("\n", $out));
        self::$extDir = self::$root . trim((string) shell_exec('php-config --extension-dir'));
        $version = implode('.', array_slice(explode('.', trim((string) shell_exec('php-config --version'))), 0, 2));
        self::$ini = self::$root . "/etc/php/$version/mods-available/resilient.ini";
    }

    public function testTheLayoutIsPhpsOwn(): void
    {
        $this->assertFileExists(self::$extDir . '/resilient.so');
        $settings = array_values(array_filter(
            array_map('trim', file(self::$ini)),
            fn ($l) => $l !== '' && $l[0] !== ';',
        ));
        $this->assertSame(['extension=resilient'], $settings, 'the ini names the extension, no path');
        foreach (['cli', 'fpm'] as $sapi) {
            $link = dirname(self::$ini, 2) . "/$sapi/conf.d/20-resilient.ini";
            $this->assertTrue(is_link($link), "$sapi enables it");
        }
    }

    public function testTheCliLoadsItByName(): void
    {
        $cmd = sprintf(
            'env PHP_INI_SCAN_DIR= php -c %s -d extension_dir=%s -m 2>&1',
            escapeshellarg(self::$ini),
            escapeshellarg(self::$extDir),
        );
        exec($cmd, $modules, $rc);
        $this->assertSame(0, $rc, implode("\n", $modules));
        $this->assertContains('resilient', $modules);
    }

    public function testAnFpmWorkerLoadsItByName(): void
    {
        $dir = Run::tempDir('install-fpm');
        $asRoot = posix_geteuid() === 0;
        file_put_contents("$dir/fpm.conf", implode("\n", [
            '[global]', "pid = $dir/fpm.pid", "error_log = $dir/fpm-error.log", 'daemonize = no', '',
            '[www]', ...($asRoot ? ['user = root', 'group = root'] : []),
            "listen = $dir/www.sock", 'listen.mode = 0600', 'pm = static', 'pm.max_children = 1', '',
        ]));
        $fpm = ServiceProcess::start([
            'env', 'PHP_INI_SCAN_DIR=', 'php-fpm8.2', ...($asRoot ? ['-R'] : []),
            '-c', self::$ini, '-d', 'extension_dir=' . self::$extDir,
            '-d', 'resilient.shm_path=' . Run::shmPath('install'),
            '-F', '-O', '-y', "$dir/fpm.conf",
        ], "$dir/fpm");
        try {
            $this->waitFor(fn () => file_exists("$dir/www.sock") ?: null, 15.0, 'the FPM socket');
            $body = Fcgi::get("$dir/www.sock", Run::root() . '/tests/fixtures/install/info.php');
            $info = json_decode($body, true);
            $this->assertIsArray($info, $body . @file_get_contents("$dir/fpm-error.log"));
            $this->assertTrue($info['loaded'] && $info['client'], $body);
            $this->assertSame(realpath(self::$ini), realpath((string) $info['ini']), 'only the installed ini');
            $this->assertFalse($info['scanned'], 'no conf.d scanned');
        } finally {
            $fpm->stop();
        }
    }
}
