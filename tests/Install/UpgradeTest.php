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

    /**
     * The ini given its line may hold a Redis password: it keeps its mode, owner and group.
     * Before, it was rewritten 0644 root:root, readable by every local user.
     */
    public function testAnIniGivenTheLineKeepsItsModeAndGroup(): void
    {
        $root = Run::tempDir('upgrade-mode');
        $this->install($root);
        $ini = $this->ini($root);
        file_put_contents($ini, "resilient.backend=\"redis://:s3cret@10.0.0.5:6379/0\"\n");
        chmod($ini, 0640);
        chgrp($ini, 'daemon');
        $group = filegroup($ini);

        $this->install($root);

        clearstatcache();
        $this->assertSame(['extension=resilient'], $this->extensionLines($ini));
        $this->assertSame(0640, fileperms($ini) & 0777, 'its mode');
        $this->assertSame($group, filegroup($ini), 'its group');
    }

    /** A symlinked ini stays a symlink: its target gets the line. */
    public function testASymlinkedIniHasItsTargetGivenTheLine(): void
    {
        $root = Run::tempDir('upgrade-link');
        $this->install($root);
        $ini = $this->ini($root);
        mkdir("$root/managed");
        file_put_contents("$root/managed/resilient.ini", "resilient.web_max_attempts=2\n");
        unlink($ini);
        symlink("$root/managed/resilient.ini", $ini);

        $this->install($root);

        clearstatcache();
        $this->assertTrue(is_link($ini), 'still a symlink');
        $this->assertSame("$root/managed/resilient.ini", readlink($ini));
        $this->assertSame(['extension=resilient'], $this->extensionLines("$root/managed/resilient.ini"));
    }

    /**
     * A PHP without Debian's /etc/php/<version> (built from source, the official Docker
     * images): the ini goes where that PHP scans (`php-config --ini-dir`). Before, the install
     * wrote /etc/php/<version>, which such a PHP never reads, and said it was enabled.
     */
    public function testAPhpWithoutDebiansLayoutGetsTheIniInItsScanDir(): void
    {
        $root = Run::tempDir('upgrade-layout');
        $bin = Run::tempDir('upgrade-layout-bin');
        $fake = fn (string $iniDir) => file_put_contents("$bin/php-config", "#!/bin/sh\ncase \"\$1\" in\n"
            . "--extension-dir) echo /usr/local/lib/php/extensions/no-debug-non-zts-20210902 ;;\n"
            . "--version) echo 8.1.99 ;;\n--ini-dir) echo $iniDir ;;\nesac\n");
        $fake('/usr/local/etc/php/conf.d');
        chmod("$bin/php-config", 0755);
        $this->assertDirectoryDoesNotExist('/etc/php/8.1', 'a version this machine has no layout for');

        $out = $this->install($root, ['PATH' => "$bin:" . getenv('PATH')]);

        $this->assertFileExists("$root/usr/local/lib/php/extensions/no-debug-non-zts-20210902/resilient.so");
        $this->assertSame(['extension=resilient'], $this->extensionLines("$root/usr/local/etc/php/conf.d/resilient.ini"), $out);
        $this->assertDirectoryDoesNotExist("$root/etc/php", $out);

        // Another file of the scan dir loads it already (`docker-php-ext-enable resilient`):
        // no second one, which would load it twice.
        $root2 = Run::tempDir('upgrade-layout-docker');
        mkdir("$root2/usr/local/etc/php/conf.d", 0755, true);
        file_put_contents("$root2/usr/local/etc/php/conf.d/docker-php-ext-resilient.ini", "extension=resilient\n");
        $out = $this->install($root2, ['PATH' => "$bin:" . getenv('PATH')]);
        $this->assertFileDoesNotExist("$root2/usr/local/etc/php/conf.d/resilient.ini", $out);
        $this->assertStringContainsString('docker-php-ext-resilient.ini loads it already', $out);

        // No scan dir either: a clear error, nothing written.
        $fake('');
        $root = Run::tempDir('upgrade-layout-none');
        exec(sprintf('PATH=%s DESTDIR=%s %s/scripts/install.sh 2>&1', escapeshellarg("$bin:" . getenv('PATH')),
            escapeshellarg($root), escapeshellarg(Run::root())), $lines, $rc);
        $this->assertSame(1, $rc, implode("\n", $lines));
        $this->assertStringContainsString('add extension=resilient to your php.ini', implode("\n", $lines));
        $this->assertSame([], array_values(array_diff(scandir($root), ['.', '..'])), 'nothing written');
    }

    /**
     * Without DESTDIR the install ends by asking `php -m`: a PHP that does not list the
     * extension then (another scan dir, another extension_dir) fails the install, saying so.
     * Here php-config names directories of a temporary tree, and `php` lists no resilient.
     */
    public function testAnInstallThatPhpDoesNotLoadFails(): void
    {
        $tree = Run::tempDir('upgrade-verify');
        $bin = Run::tempDir('upgrade-verify-bin');
        // php-config's own PHP is asked (`--php-binary`), not the `php` first in PATH.
        file_put_contents("$bin/php-config", "#!/bin/sh\ncase \"\$1\" in\n--extension-dir) echo $tree/ext ;;\n"
            . "--version) echo 8.1.99 ;;\n--ini-dir) echo $tree/conf.d ;;\n--php-binary) echo $bin/php8.1 ;;\nesac\n");
        file_put_contents("$bin/php8.1", "#!/bin/sh\necho '[PHP Modules]'; echo Core\n");
        file_put_contents("$bin/php", "#!/bin/sh\necho '[PHP Modules]'; echo resilient\n");
        file_put_contents("$bin/phpenmod", "#!/bin/sh\nexit 1\n");
        foreach (['php-config', 'php8.1', 'php', 'phpenmod'] as $tool) {
            chmod("$bin/$tool", 0755);
        }
        $install = function () use ($bin): array {
            exec(sprintf('env -u DESTDIR PATH=%s %s/scripts/install.sh 2>&1', escapeshellarg("$bin:" . getenv('PATH')),
                escapeshellarg(Run::root())), $out, $rc);
            return [$rc, implode("\n", $out)];
        };

        [$rc, $out] = $install();
        $this->assertSame(1, $rc, $out);
        $this->assertStringContainsString("the CLI's PHP ($bin/php8.1) does not load it ('php -m' does not list resilient)", $out);
        $this->assertFileExists("$tree/ext/resilient.so");
        $this->assertSame(['extension=resilient'], $this->extensionLines("$tree/conf.d/resilient.ini"));

        // Listed, then more than a pipe holds (200 KB): found, and the install ends well. (Piped
        // to `grep -q`, which leaves at the first match, the writer died of SIGPIPE and the
        // pipeline failed under pipefail.)
        file_put_contents("$bin/php8.1", "#!/bin/sh\necho '[PHP Modules]'; echo resilient\n"
            . "i=0; while [ \$i -lt 10000 ]; do echo zzzzzzzzzzzzzzzzzzzz; i=\$((i+1)); done\n");
        [$rc, $out] = $install();
        $this->assertSame(0, $rc, $out);
    }

    /** A relative DESTDIR is the caller's directory's, not the repository's. */
    public function testARelativeDestdirIsTheCallersDirectorys(): void
    {
        $cwd = Run::tempDir('upgrade-relative');
        exec(sprintf('cd %s && DESTDIR=stage %s/scripts/install.sh 2>&1', escapeshellarg($cwd), escapeshellarg(Run::root())), $out, $rc);
        $this->assertSame(0, $rc, implode("\n", $out));
        $this->assertFileExists($this->ini("$cwd/stage"));
        $this->assertDirectoryDoesNotExist(Run::root() . '/stage');
    }

    /** @param array<string, string> $env */
    private function install(string $root, array $env = []): string
    {
        $vars = '';
        foreach ($env as $k => $v) {
            $vars .= sprintf('%s=%s ', $k, escapeshellarg($v));
        }
        exec(sprintf('%sDESTDIR=%s %s/scripts/install.sh 2>&1', $vars, escapeshellarg($root), escapeshellarg(Run::root())), $out, $rc);
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
