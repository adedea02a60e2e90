<?php

declare(strict_types=1);

namespace Resilient\Tests\BadInput;

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCase;

/**
 * A bad setting is never replaced by the default in silence. A bad value given
 * at startup (-d here; php.ini and FPM pools go the same way, see tests/Fpm/PoolSegmentTest.php)
 * makes the first use of the segment throw, naming the key and the value; ini_set() of a bad
 * value returns false and changes nothing.
 */
final class IniTest extends TestCase
{
    private const USE_IT = 'new Resilient\Funnel("ini", limit: 1); return "used";';

    /** @return iterable<string,array{string,string,string}> */
    public static function badValues(): iterable
    {
        $slots = 'must be an integer between 1 and 65536';
        yield 'slots 0' => ['resilient.shm_slots', '0', $slots];
        yield 'slots 65537' => ['resilient.shm_slots', '65537', $slots];
        yield 'slots abc' => ['resilient.shm_slots', 'abc', $slots];
        yield 'slots -1' => ['resilient.shm_slots', '-1', $slots];
        yield 'slots 1.5' => ['resilient.shm_slots', '1.5', $slots];
        yield 'path relative' => ['resilient.shm_path', 'segment.shm', 'must be an absolute path'];
        yield 'path ./relative' => ['resilient.shm_path', './x/segment.shm', 'must be an absolute path'];
        yield 'path leading space' => ['resilient.shm_path', ' /dev/shm/x.shm', 'must be an absolute path'];
        yield 'required maybe' => ['resilient.shm_required', 'maybe', 'must be a boolean'];
    }

    /** @dataProvider badValues */
    public function testBadStartupValueIsAnErrorNamingTheKey(string $key, string $value, string $rule): void
    {
        $ini = ['resilient.shm_path' => Run::shmPath('ini-' . bin2hex(random_bytes(3))), $key => $value];
        $r = PhpProcess::runScript('expect_throw.php', [self::USE_IT], $ini, 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertTrue($out['threw'], "$key=$value was used silently: " . json_encode($out));
        $this->assertSame('Resilient\SharedMemoryError', $out['class']);
        $this->assertStringStartsWith("$key: $rule", $out['message']);
        $this->assertStringContainsString("got '$value'", $out['message']);
        clearstatcache();
        $this->assertFileDoesNotExist($ini['resilient.shm_path'], 'nothing may be created with a bad setting');
    }

    /**
     * A web cap under the 1 ms a client's timeout takes would fail every web attempt at once:
     * refused by `ini_set`, and from php.ini an error when a web caller uses it.
     *
     * @return iterable<string,array{string,string}>
     */
    public static function capsTooSmall(): iterable
    {
        yield 'web_timeout 5e-324' => ['resilient.web_timeout', '5e-324'];
        yield 'web_timeout 0.0005' => ['resilient.web_timeout', '0.0005'];
        yield 'web_connect_timeout 1e-9' => ['resilient.web_connect_timeout', '1e-9'];
    }

    /** @dataProvider capsTooSmall */
    public function testACapUnderAMillisecondIsRefused(string $key, string $value): void
    {
        $this->testIniSetOfABadValueReturnsFalse($key, $value);
        $r = PhpProcess::runScript('expect_throw.php', ['new Resilient\\Client("cap", ["context" => "web"]);'], [
            'resilient.shm_path' => Run::shmPath('ini-' . bin2hex(random_bytes(3))), $key => $value,
        ], 20);
        $out = $r->json();
        $this->assertTrue($out['threw'], "$key=$value was used silently: " . json_encode($out));
        $this->assertStringStartsWith("$key: must be a number of seconds, at least 0.001", $out['message']);
    }

    /** @dataProvider badValues */
    public function testIniSetOfABadValueReturnsFalse(string $key, string $value): void
    {
        $code = sprintf('$before = ini_get(%1$s); $ok = ini_set(%1$s, %2$s); return [$ok, ini_get(%1$s) === $before];', var_export($key, true), var_export($value, true));
        $out = PhpProcess::runScript('expect_throw.php', [$code], [], 20)->json();
        $this->assertSame([false, true], $out['returned'], json_encode($out));
    }

    /**
     * After a refused configured value the engine keeps the default, and ini_set() of that
     * default (what a script does to ask for it) was accepted and ignored: the refused value
     * still threw. Any good value set in the request applies.
     */
    public function testIniSetOfTheDefaultAfterARefusedValueApplies(): void
    {
        // The path's default (segmentPath() names it without opening it)...
        $code = 'return [ini_set("resilient.shm_path", ""), Resilient\\Metrics::segmentPath()];';
        $out = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => 'relative'], 20)->json();
        $this->assertFalse($out['threw'], json_encode($out));
        $this->assertSame(['', '/dev/shm/resilient-' . posix_getuid() . '.v8.shm'], $out['returned']);
        // ... and the slots' (256), used.
        $path = Run::shmPath('ini-default-' . bin2hex(random_bytes(3)));
        $code = 'return [ini_set("resilient.shm_slots", "256"), Resilient\\Funnel::degradedReason()];';
        $out = PhpProcess::runScript('expect_throw.php', [$code], ['resilient.shm_path' => $path, 'resilient.shm_slots' => 'abc'], 20)->json();
        $this->assertFalse($out['threw'], json_encode($out));
        $this->assertSame(['256', null], $out['returned']);
        $this->assertSame(Run::segmentSize(256), filesize($path));
    }

    /** A control character in the path: a newline, named in the error log, forged lines there. */
    public function testIniSetOfAPathWithAControlCharacterReturnsFalse(): void
    {
        foreach (["/tmp/x\nPHP Fatal error: forged", "/tmp/x\ty.shm", "/tmp/x\x7fy.shm"] as $path) {
            $this->testIniSetOfABadValueReturnsFalse('resilient.shm_path', $path);
        }
    }

    public function testAGoodValueStillWorksAndEmptyPathMeansTheDefault(): void
    {
        $path = Run::shmPath('ini-good-' . bin2hex(random_bytes(3)));
        $out = PhpProcess::runScript('expect_throw.php', ['return [ini_get("resilient.shm_slots"), (new Resilient\Funnel("g", limit: 1))->isDegraded()];'], ['resilient.shm_path' => $path, 'resilient.shm_slots' => '7', 'resilient.shm_required' => 'on'], 20)->json();
        $this->assertSame(['7', false], $out['returned'], json_encode($out));
        $this->assertSame(Run::segmentSize(7), filesize($path));
        // Empty = the documented default (/dev/shm/resilient-<uid>.v8.shm), no error.
        $out = PhpProcess::runScript('expect_throw.php', ['return ini_set("resilient.shm_path", "");'], ['resilient.shm_path' => $path], 20)->json();
        $this->assertSame($path, $out['returned'], json_encode($out));
    }

    /**
     * In a console context the web caps do not apply, so a refused one is no error there; it is
     * said once per process in PHP's error log (the web workers it is meant for will refuse
     * it), whichever way the script reaches the caps: a client, then each Context method.
     */
    public function testRefusedWebCapsAreSaidOnceInAConsoleContext(): void
    {
        $code = 'new Resilient\Client("caps"); new Resilient\Client("caps2");
            return [Resilient\Context::maxAttempts(5), Resilient\Context::timeout(30), Resilient\Context::connectTimeout(10)];';
        $ini = [
            'resilient.shm_path' => Run::shmPath('ini-caps-' . bin2hex(random_bytes(3))),
            'resilient.web_timeout' => 'abc',
            'resilient.web_connect_timeout' => '-1',
            'resilient.web_max_attempts' => '500',
        ];
        $r = PhpProcess::runScript('expect_throw.php', [$code], $ini, 20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertFalse($out['threw'], json_encode($out));
        $this->assertEquals([5, 30.0, 10.0], $out['returned'], 'no cap in a console context');
        // CLI without error_log: PHP's log goes to stderr.
        foreach (['resilient.web_timeout' => "'abc'", 'resilient.web_connect_timeout' => "'-1'", 'resilient.web_max_attempts' => "'500'"] as $key => $value) {
            $this->assertSame(1, substr_count($r->stderr, "$key: "), "$key said once:\n" . $r->stderr);
            $this->assertStringContainsString("got $value", $r->stderr);
        }
    }

    /**
     * `php --ri resilient` (and phpinfo()) shows a refused configured value as refused, not as
     * the default the engine holds in its place (which reads as the setting in effect while its
     * first use throws), and names the shared-memory layout and the segment file in use.
     */
    public function testPhpinfoShowsARefusedValueAsRefusedAndTheSegmentInUse(): void
    {
        $path = Run::shmPath('ini-info');
        $r = PhpProcess::args(['--ri', 'resilient'], [
            'resilient.shm_path' => $path,
            'resilient.web_timeout' => '0',
            'resilient.shm_slots' => 'abc',
        ])->wait(20);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $this->assertStringContainsString("resilient.web_timeout => (refused '0': a web caller's use throws, a console caller's is said in the error log)", $r->stdout);
        $this->assertStringContainsString("resilient.shm_slots => (refused 'abc': its first use throws)", $r->stdout);
        $this->assertStringContainsString('resilient.web_connect_timeout => 3 => 3', $r->stdout);
        $this->assertMatchesRegularExpression('/^Shared-memory layout version => \d+$/m', $r->stdout);
        $this->assertStringContainsString("Shared-memory segment (this process) => $path", $r->stdout);
        $this->assertFileDoesNotExist($path, 'phpinfo() creates no segment');
    }

    /**
     * A secret configured where a word belongs (a Redis URL put in `resilient.context` by a
     * mixed-up env file): neither `php --ri` nor the error log line of its use shows more of it
     * than its word-like start; `php --ri` says what its use does (a refused context is taken
     * as `auto`, a refused web cap throws for web callers only).
     */
    public function testARefusedValueShowsOnlyItsWordLikeStart(): void
    {
        $ini = [
            'resilient.shm_path' => Run::shmPath('ini-secret'),
            'resilient.context' => 'redis://:s3cr3tPw@cache:6379',
            'resilient.web_timeout' => 'redis://:s3cr3tPw@cache:6379',
            'log_errors' => '1',
            'error_log' => '',
        ];
        $info = PhpProcess::args(['--ri', 'resilient'], $ini)->wait(20);
        $this->assertSame(0, $info->exitCode, $info->describe());
        $this->assertStringContainsString("resilient.context => (refused 'redis…': auto applies, said in the error log)", $info->stdout);
        $this->assertStringContainsString("resilient.web_timeout => (refused 'redis…': a web caller's use throws, a console caller's is said in the error log)", $info->stdout);
        $used = PhpProcess::runCode('var_export(Resilient\Context::isWeb()); echo " ", Resilient\Context::timeout(5.0);', $ini);
        $this->assertSame(0, $used->exitCode, $used->describe());
        $this->assertSame('false 5', $used->stdout, 'auto (the CLI: console), and no web cap in a console context');
        $this->assertStringContainsString("resilient.context: must be auto, web or console, got 'redis…'", $used->stderr);
        $this->assertStringContainsString("resilient.web_timeout: must be", $used->stderr);
        foreach ([$info->stdout, $info->stderr, $used->stdout, $used->stderr] as $said) {
            $this->assertStringNotContainsString('s3cr3t', $said);
        }
    }
}
