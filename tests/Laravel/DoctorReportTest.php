<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Resilient\Laravel\Console\CheckCommand;
use Resilient\Laravel\Console\DoctorCommand;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\ProcessResult;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\ServiceProcess;

/**
 * What `resilient:doctor` (and for config keys `resilient:check`) says beyond the segment and
 * the clients: segment files of this user left by a build of another layout version, keys of
 * config/resilient.php nothing reads, and the backend in effect with whether Redis answers.
 * Each in a child app, with the ini it needs.
 */
final class DoctorReportTest extends PackageTestCase
{
    private static ?ServiceProcess $redis = null;
    private static int $redisPort = 0;

    public static function tearDownAfterClass(): void
    {
        self::$redis?->stop();
        self::$redis = null;
    }

    /**
     * After an upgrade that changed the layout, the other build's processes count in their own
     * file at the default path (the version is in its name): doctor lists this user's files of
     * another version, says what they mean and when they can go, and does not fail for them.
     */
    public function testASegmentOfThisUserOfAnotherLayoutVersionIsAWarningThatDoesNotFail(): void
    {
        $layout = self::layout();
        $dir = Run::tempDir('layouts');
        $uid = posix_getuid();
        $older = sprintf('%s/resilient-%d.v%d.shm', $dir, $uid, $layout - 1);
        $newer = sprintf('%s/resilient-%d.v%d.shm', $dir, $uid, $layout + 1);
        $same = sprintf('%s/resilient-%d.v%d.shm', $dir, $uid, $layout);
        foreach ([$older, $newer, $same] as $file) {
            file_put_contents($file, '');
            chmod($file, 0600);
        }
        $result = $this->doctor([], ['resilient.shm_path' => "$dir/app.shm"]);
        $out = $result->stdout;

        $this->assertStringContainsString("warning: segment $older is of shared-memory layout version " . ($layout - 1)
            . ", this build's is $layout: processes of an older build", $out, $result->describe());
        $this->assertStringContainsString("warning: segment $newer is of shared-memory layout version " . ($layout + 1)
            . ", this build's is $layout: processes of a newer build", $out);
        $this->assertStringContainsString('(e.g. a queue worker not restarted since the deploy) count there, apart from this build\'s', $out);
        $this->assertStringContainsString("once no process uses it (restart PHP-FPM and the queue workers; `fuser $older` then prints no process), remove it", $out);
        $this->assertStringNotContainsString("segment $same ", $out, 'one of this build\'s layout is no other build\'s');
        // Not a problem by itself: the count is of the other lines only.
        $this->assertSame(1, preg_match('/(\d+) problem\(s\) found\.|No problems found\./', $out, $m), $out);
        $counted = preg_match_all('/^(error|warning): (?!segment \S+ is of shared-memory layout version)/m', $out);
        $this->assertSame($counted, (int) ($m[1] ?? 0), $out);
    }

    /**
     * A typo in a key outside a client's entry was ignored without a word (logging stayed off,
     * the queue's defaults applied): doctor and check name each unknown key, at the top and in
     * each section, with the key meant when one is close.
     */
    public function testUnknownConfigKeysAreNamedWithTheOneMeant(): void
    {
        $config = [
            'log_chanel' => 'stack',
            'funnel' => ['sap' => ['limit' => 3]],
            'colour' => 'blue',
            'queue' => ['release_delays' => [1, 2], 'deadline_margins' => 1.0, 'worker_timeout' => 60],
            'check' => ['path' => null],
            // Dropped as "not set" (an unset env()), so no client ever saw it.
            'defaults' => ['timout' => null, 'timeout' => 5],
        ];
        $said = [
            "resilient.log_chanel: unknown key, ignored (did you mean 'log_channel'?)",
            "resilient.funnel: unknown key, ignored (did you mean 'funnels'?)",
            'resilient.colour: unknown key, ignored (known: log_channel, events, defaults, clients, queue, check, funnels, budgets)',
            "resilient.queue.release_delays: unknown key, ignored (did you mean 'release_delay'?)",
            "resilient.queue.deadline_margins: unknown key, ignored (did you mean 'deadline_margin'?)",
            "resilient.check.path: unknown key, ignored (did you mean 'paths'?)",
            "resilient.defaults.timout: not a client option (did you mean 'timeout'?)",
        ];
        $result = $this->doctor($config);
        $this->assertStringStartsWith("exit 1\n", $result->stdout, $result->describe());
        foreach ($said as $line) {
            $this->assertStringContainsString("error: $line\n", $result->stdout);
        }
        $this->assertStringNotContainsString('worker_timeout', $result->stdout);

        $this->boot(['check' => ['paths' => [Run::tempDir('no-jobs')]]] + $config);
        $command = new CheckCommand();
        $command->setLaravel($this->app);
        $output = new \Symfony\Component\Console\Output\BufferedOutput();
        $exit = $command->run(new \Symfony\Component\Console\Input\ArrayInput(['--json' => true]), $output);
        $json = json_decode($output->fetch(), true);
        $this->assertSame(2, $exit, 'a check of config that does not run as written must not pass');
        foreach (array_filter($said, fn ($line) => ! str_starts_with($line, 'resilient.check.')) as $line) {
            $this->assertContains($line, $json['errors']);
        }
    }

    /** The package's own config and the fixture app's have no key doctor calls unknown. */
    public function testThePublishedConfigHasNoUnknownKey(): void
    {
        $result = $this->doctor(require __DIR__ . '/../../php/config/resilient.php');
        $this->assertStringNotContainsString('unknown key', $result->stdout, $result->describe());
        $this->assertStringNotContainsString('not a client option', $result->stdout);
    }

    /**
     * Doctor said nothing about `resilient.backend`: it prints the backend in effect, a
     * password masked as `php --ri` masks it, and for Redis whether it answers (a wrong password
     * or a closed port is an error); a client's own Redis URL from config is checked too, never
     * shown. No password in any output.
     */
    public function testTheBackendIsShownMaskedAndRedisIsAsked(): void
    {
        $port = self::redis();
        $url = "redis://:s3cret@127.0.0.1:$port/0";
        $client = ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1];

        $shm = $this->doctor(['clients' => ['a' => $client]]);
        $this->assertStringContainsString("backend    shm (resilient.backend)\n", $shm->stdout, $shm->describe());

        $up = $this->doctor(['clients' => ['a' => $client]], ['resilient.backend' => $url]);
        $this->assertStringContainsString("backend    redis://:***@127.0.0.1:$port/0 (resilient.backend): Redis answers\n", $up->stdout, $up->describe());

        $wrong = $this->doctor(['clients' => ['a' => $client]], ['resilient.backend' => "redis://:wrong@127.0.0.1:$port/0"]);
        $this->assertStringStartsWith("exit 1\n", $wrong->stdout);
        $this->assertStringContainsString("backend    redis://:***@127.0.0.1:$port/0 (resilient.backend)\n", $wrong->stdout, $wrong->describe());
        $this->assertStringContainsString('error: Redis (resilient.backend) did not answer', $wrong->stdout);

        // A value the extension refused reads as the default in ini_get(): shown as `php --ri`
        // shows it, and its refusal (which every client throws) is the error.
        $refused = $this->doctor([], ['resilient.backend' => 'redis:/:s3cret@nowhere']);
        $this->assertStringContainsString("backend    (not shown: it may hold a password) (resilient.backend)\n", $refused->stdout, $refused->describe());
        $this->assertStringContainsString("error: resilient.backend: must be 'shm' or a redis://, rediss:// or unix:// URL", $refused->stdout);

        $closed = Run::freePort();
        $started = microtime(true);
        $down = $this->doctor(['clients' => ['a' => $client]], ['resilient.backend' => "redis://:s3cret@127.0.0.1:$closed/0"]);
        $this->assertLessThan(10.0, microtime(true) - $started);
        $this->assertStringContainsString('error: Redis (resilient.backend) did not answer', $down->stdout, $down->describe());

        // RESILIENT_BACKEND reaches clients through `defaults`: checked, not shown.
        $config = ['defaults' => ['backend' => $url], 'clients' => ['a' => $client, 'b' => $client + ['backend' => 'shm']]];
        $own = $this->doctor($config);
        $this->assertStringContainsString('backend    client a: a Redis URL from its `backend` option (not shown): Redis answers', $own->stdout, $own->describe());
        $this->assertStringNotContainsString('client b', $own->stdout);
        $bad = $this->doctor(['defaults' => ['backend' => "redis://:wrong@127.0.0.1:$port/0"]] + $config);
        $this->assertStringContainsString('error: Redis of client a (its `backend` option) did not answer', $bad->stdout, $bad->describe());

        foreach ([$up, $wrong, $refused, $down, $own, $bad] as $result) {
            $this->assertStringNotContainsString('s3cret', $result->stdout . $result->stderr);
            $this->assertStringNotContainsString(':wrong@', $result->stdout . $result->stderr);
        }
    }

    /** doctor in a child app with $resilient as config and $ini (beside the harness's). */
    private function doctor(array $resilient, array $ini = []): ProcessResult
    {
        $code = self::childApp($resilient) . self::commandInChild(DoctorCommand::class);

        return PhpProcess::code($code, ['extension' => 'intl'] + $ini, ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(30);
    }

    /**
     * The package's own idea of the default file name (for an extension without
     * `Metrics::segmentPath()`) names this build's layout version: it stayed at 6 once when the
     * layout moved on.
     */
    public function testThePackagesDefaultPathNamesThisBuildsLayout(): void
    {
        $this->assertSame(self::layout(), \Resilient\Laravel\Console\SegmentFiles::LAYOUT);
    }

    /** The layout version of the build under test, as `php --ri resilient` shows it. */
    private static function layout(): int
    {
        ob_start();
        (new \ReflectionExtension('resilient'))->info();
        preg_match('/^Shared-memory layout version => (\d+)$/m', (string) ob_get_clean(), $m);

        return (int) $m[1];
    }

    /** A redis-server of this class with a password (`s3cret`); its port. */
    private static function redis(): int
    {
        if (self::$redis !== null) {
            return self::$redisPort;
        }
        $port = Run::freePort();
        $dir = Run::tempDir('redis-auth');
        self::$redis = ServiceProcess::start(
            ['redis-server', '--bind', '127.0.0.1', '--port', (string) $port, '--save', '', '--appendonly', 'no', '--dir', $dir, '--requirepass', 's3cret'],
            "$dir/redis",
        );
        $end = microtime(true) + 10;
        while (true) {
            try {
                $r = new \Redis();
                if (@$r->connect('127.0.0.1', $port, 0.2) && $r->auth('s3cret') && $r->ping()) {
                    break;
                }
            } catch (\RedisException) {
            }
            if (microtime(true) > $end || ! self::$redis->isRunning()) {
                throw new \RuntimeException('redis-server did not start: ' . @file_get_contents("$dir/redis.out"));
            }
            usleep(20_000);
        }

        return self::$redisPort = $port;
    }
}
