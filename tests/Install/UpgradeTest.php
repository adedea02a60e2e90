<?php

declare(strict_types=1);

namespace Resilient\Tests\Install;

use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A second `make install` over a first one (an upgrade), under DESTDIR: the user's settings in
 * mods-available/resilient.ini survive it, and the files PHP loads are replaced by rename, never
 * written in place (a PHP process starting meanwhile would map a half-written resilient.so).
 */
final class UpgradeTest extends TestCase
{
    public function testAnUpgradeKeepsTheUsersSettings(): void
    {
        $root = Run::tempDir('upgrade');
        $this->install($root);
        $ini = $this->ini($root);
        file_put_contents($ini, "resilient.shm_path=/dev/shm/custom.shm\nresilient.backend=redis://10.0.0.5:6379\n", FILE_APPEND);
        $inode = fileinode($ini);

        $out = $this->install($root);

        $text = (string) file_get_contents($ini);
        $this->assertStringContainsString("resilient.shm_path=/dev/shm/custom.shm\n", $text);
        $this->assertStringContainsString("resilient.backend=redis://10.0.0.5:6379\n", $text);
        $this->assertSame(['extension=resilient'], $this->extensionLines($ini), 'one extension line');
        clearstatcache();
        $this->assertSame($inode, fileinode($ini), 'the ini is left as it is, not rewritten');
        $this->assertStringContainsString('kept', $out, 'the install says it kept the ini');
    }

    public function testAnIniWithoutTheExtensionLineGetsOneAndItsSettingsLoad(): void
    {
        $root = Run::tempDir('upgrade-noext');
        $this->install($root);
        $ini = $this->ini($root);
        // A commented-out line does not load the extension; no newline at the end either.
        file_put_contents($ini, "; mine\n;extension=resilient\nresilient.web_max_attempts=2");
        $inode = fileinode($ini);

        $this->install($root);

        $this->assertSame(['extension=resilient'], $this->extensionLines($ini));
        clearstatcache();
        $this->assertNotSame($inode, fileinode($ini), 'rewritten by rename');
        $this->assertSame(0644, fileperms($ini) & 0777);
        $cmd = sprintf(
            'env PHP_INI_SCAN_DIR= php -c %s -d extension_dir=%s -r %s 2>&1',
            escapeshellarg($ini),
            escapeshellarg($this->extDir($root)),
            escapeshellarg('echo ini_get("resilient.web_max_attempts");'),
        );
        exec($cmd, $out, $rc);
        $this->assertSame([0, '2'], [$rc, implode("\n", $out)], 'loaded, with the kept setting');
    }

    public function testAnInstallThatFailsMidwayLeavesTheOldSoWhole(): void
    {
        $root = Run::tempDir('upgrade-fail');
        $this->install($root);
        $so = $this->extDir($root) . '/resilient.so';
        $before = sha1_file($so);

        // Files are limited to 1 MiB: copying the .so (several MiB) fails halfway through,
        // as a full disk would.
        exec(sprintf(
            'trap "" XFSZ; ulimit -f 1024; DESTDIR=%s %s/scripts/install.sh 2>&1',
            escapeshellarg($root),
            escapeshellarg(Run::root()),
        ), $out, $rc);

        $this->assertNotSame(0, $rc, implode("\n", $out));
        clearstatcache();
        $this->assertSame($before, sha1_file($so), 'the old .so, whole');
        $this->assertSame(['resilient.so'], array_values(array_diff(scandir($this->extDir($root)), ['.', '..'])), 'no temporary file left');
    }

    public function testAnUpgradeLeavesTheOldSoToProcessesThatHaveItOpen(): void
    {
        $root = Run::tempDir('upgrade-so');
        $this->install($root);
        $so = $this->extDir($root) . '/resilient.so';
        // Held open across the upgrade, as a running PHP maps it: its inode cannot be reused.
        $old = fopen($so, 'rb');
        $inode = fstat($old)['ino'];
        $bytes = stream_get_contents($old);

        $this->install($root);

        clearstatcache();
        $this->assertNotSame($inode, fileinode($so), 'a new file renamed over the old one');
        rewind($old);
        $this->assertSame($bytes, stream_get_contents($old), 'the old file is intact for who has it');
        fclose($old);
        $this->assertSame(0644, fileperms($so) & 0777);
        $this->assertSame(['resilient.so'], array_values(array_diff(scandir($this->extDir($root)), ['.', '..'])), 'no temporary file left');
        $this->assertSame(0644, fileperms($this->ini($root)) & 0777);
    }

    private function install(string $root): string
    {
        exec(sprintf('DESTDIR=%s %s/scripts/install.sh 2>&1', escapeshellarg($root), escapeshellarg(Run::root())), $out, $rc);
        $this->assertSame(0, $rc, implode("\n", $out));
        return implode("\n", $out);
    }

    private function extDir(string $root): string
    {
        return $root . trim((string) shell_exec('php-config --extension-dir'));
    }

    private function ini(string $root): string
    {
        $version = implode('.', array_slice(explode('.', trim((string) shell_exec('php-config --version'))), 0, 2));
        return "$root/etc/php/$version/mods-available/resilient.ini";
    }

    /** @return list<string> the ini's uncommented `extension=` lines */
    private function extensionLines(string $ini): array
    {
        return array_values(array_filter(
            array_map('trim', file($ini)),
            fn ($l) => preg_match('/^extension\s*=/', $l) === 1,
        ));
    }
}
