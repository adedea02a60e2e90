<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/**
 * One php-fpm master with static pools on unix sockets, the way production runs it: started
 * with `-n` and the extension loaded by `-d extension=` on its command line, so MINIT runs in
 * the master before it forks. As root (CI) the pools run as root (`php-fpm -R`).
 *
 * Used by FpmServer (behind nginx) and by the HTTP suite's WebRunner (over cgi-fcgi). Pool
 * sockets are `$dir/<pool>.sock`; logs `$dir/fpm-error.log` and `$dir/php-error-<pool>.log`.
 */
final class FpmMaster
{
    /**
     * Writes `$dir/fpm.conf` and starts the master (stdout/stderr in `$dir/fpm.out|err`).
     *
     * With `$extensionInMaster = false` the master does not load the extension: a pool that wants
     * it loads it itself (`'ini' => ['extension' => Run::extension(), ...]`, in the order given).
     *
     * @param array<string, array{workers: int, ini?: array<string,string>, values?: array<string,string>, env?: array<string,string>}> $pools (`ini`: php_admin_value lines; `values`: php_value lines, which a `.user.ini` may change)
     * @param array<string,string> $masterIni more `-d` settings of the master
     * @param bool $systemIni read the system's php-fpm php.ini and conf.d (opcache and the other
     *        extensions installed) instead of none (`-n`)
     */
    public static function start(string $dir, array $pools, string $shmPath, bool $extensionInMaster = true, array $masterIni = [], bool $systemIni = false): ServiceProcess
    {
        $asRoot = posix_geteuid() === 0;
        $conf = ['[global]', "pid = $dir/fpm.pid", "error_log = $dir/fpm-error.log", 'daemonize = no', 'log_level = notice', ''];
        foreach ($pools as $name => $pool) {
            array_push(
                $conf,
                "[$name]",
                ...($asRoot ? ['user = root', 'group = root'] : []),
                ...[
                    "listen = $dir/$name.sock",
                    'listen.mode = 0600',
                    'pm = static',
                    "pm.max_children = {$pool['workers']}",
                    'catch_workers_output = yes',
                    'decorate_workers_output = no',
                    'request_terminate_timeout = 60s',
                    "php_admin_value[error_log] = $dir/php-error-$name.log",
                    'php_admin_flag[log_errors] = on',
                    'php_admin_flag[display_errors] = off',
                    'php_admin_value[error_reporting] = -1',
                ],
            );
            foreach ($pool['env'] ?? [] as $k => $v) {
                $conf[] = "env[$k] = $v";
            }
            foreach ($pool['ini'] ?? [] as $k => $v) {
                $conf[] = "php_admin_value[$k] = $v";
            }
            foreach ($pool['values'] ?? [] as $k => $v) {
                $conf[] = "php_value[$k] = $v";
            }
            $conf[] = '';
        }
        file_put_contents("$dir/fpm.conf", implode("\n", $conf));

        return ServiceProcess::start([
            ...($systemIni ? ['env', 'PHP_INI_SCAN_DIR=' . self::systemScanDir($dir)] : []),
            'php-fpm8.2', ...($systemIni ? [] : ['-n']),
            ...($asRoot ? ['-R'] : []),
            ...($extensionInMaster ? ['-d', 'extension=' . Run::extension()] : []),
            '-d', 'resilient.shm_path=' . $shmPath,
            ...array_merge(...array_map(fn ($k, $v) => ['-d', "$k=$v"], array_keys($masterIni), $masterIni)),
            '-F', '-O', '-y', "$dir/fpm.conf",
        ], "$dir/fpm");
    }

    /**
     * The system's FPM conf.d without a file that loads resilient (a `make install` on this
     * machine): the build under test is the one the master loads, never an installed one
     * (which would load first, and the build's `-d extension=` be refused as already loaded).
     */
    private static function systemScanDir(string $dir): string
    {
        $scan = "$dir/conf.d";
        @mkdir($scan);
        foreach (glob('/etc/php/8.2/fpm/conf.d/*.ini') ?: [] as $ini) {
            if (preg_match('/^\s*extension\s*=\s*"?([^";]*\/)?resilient(\.so)?"?\s*(;.*)?$/m', (string) file_get_contents($ini)) !== 1) {
                @symlink($ini, "$scan/" . basename($ini));
            }
        }
        return $scan;
    }
}
