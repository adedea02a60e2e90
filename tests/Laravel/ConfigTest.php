<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Support\Facades\Event;
use Illuminate\Support\Facades\Http;
use Resilient\Laravel\Events\AttemptMade;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * Config without closures: the package's config survives `config:cache` (var_export), `.env`
 * keys reach the clients, attempts reach an event and a log channel without secrets; and the
 * extension check at boot.
 */
final class ConfigTest extends PackageTestCase
{
    private const ENV = ['RESILIENT_LOG_CHANNEL', 'RESILIENT_EVENTS', 'RESILIENT_TIMEOUT', 'RESILIENT_MAX_ATTEMPTS', 'RESILIENT_CONTEXT'];

    protected function tearDown(): void
    {
        foreach (self::ENV as $k) {
            unset($_ENV[$k], $_SERVER[$k]);
            putenv($k);
        }
        parent::tearDown();
    }

    private static function env(array $values): void
    {
        foreach ($values as $k => $v) {
            $_ENV[$k] = $_SERVER[$k] = $v;
            putenv("$k=$v");
        }
    }

    public function testThePackageConfigSurvivesVarExportAsConfigCacheWritesIt(): void
    {
        foreach ([[], ['RESILIENT_LOG_CHANNEL' => 'stack', 'RESILIENT_TIMEOUT' => '0.4', 'RESILIENT_EVENTS' => 'false']] as $env) {
            self::env($env);
            $app = $this->boot([]);
            $config = $app['config']->get('resilient');
            // What ConfigCacheCommand does: write var_export, then require the file.
            $file = Run::tempDir('config') . '/config.php';
            file_put_contents($file, '<?php return ' . var_export(['resilient' => $config], true) . ';' . PHP_EOL);
            $this->assertSame(['resilient' => $config], require $file);
            $this->assertSame($env['RESILIENT_LOG_CHANNEL'] ?? null, $config['log_channel']);
            $this->assertSame(! isset($env['RESILIENT_EVENTS']), $config['events']);
            $this->assertSame($env['RESILIENT_TIMEOUT'] ?? null, $config['defaults']['timeout']);
            $this->tearDown();
        }

        // The problem it avoids: a closure does not survive.
        $this->assertStringContainsString('Closure::__set_state', var_export(['on_attempt' => fn () => null], true));
    }

    public function testEnvDefaultsReachEveryClientUnlessItsEntrySaysOtherwise(): void
    {
        [$name, $key, $client] = $this->upstreamClient('cfg-env', ['backoff' => ['base' => 0.001, 'cap' => 0.002]]);
        $this->up->script($key, [['status' => 503]]);
        self::env(['RESILIENT_MAX_ATTEMPTS' => '1', 'RESILIENT_TIMEOUT' => '2.5', 'RESILIENT_CONTEXT' => 'console']);
        $own = Run::name('cfg-own');
        $this->boot(['clients' => [$name => $client, $own => $client + ['max_attempts' => 2]]] + require __DIR__ . '/../../php/config/resilient.php');

        $this->assertSame('1', Resilient::clientConfig($name)['max_attempts']);
        $this->assertSame('2.5', Resilient::clientConfig($name)['timeout']);
        $this->assertSame('console', Resilient::clientConfig($name)['context']);
        $this->assertSame(2, Resilient::clientConfig($own)['max_attempts']);
        $this->assertArrayNotHasKey('deadline', Resilient::clientConfig($name), 'unset env keys leave the extension\'s default');
        $this->assertSame(503, Http::resilient($name)->get('/one')->status());
        $this->assertSame(503, Http::resilient($own)->get('/two')->status());
        $this->assertSame(['/one', '/two', '/two'], array_column($this->up->attempts($key, 3), 'path'));
    }

    /**
     * A tenancy bootstrapper (or a test) sets a client's entry with config([...]) in a process
     * that already called it: a queue worker between two tenants' jobs. The next call is the
     * new entry's, through either door: before, the client built first went on sending tenant
     * A's key, and Http::resilient() took tenant B's URL with tenant A's headers.
     */
    public function testAClientWhoseEntryChangedAtRunTimeSendsWithTheNewEntry(): void
    {
        $name = Run::name('cfg-tenant');
        $keys = ['a' => $this->up->key('cfg-tenant-a'), 'b' => $this->up->key('cfg-tenant-b')];
        foreach ($keys as $key) {
            $this->up->script($key, [['status' => 200]]);
        }
        $this->boot(['clients' => []]);
        foreach (['a', 'b', 'a'] as $i => $t) {
            config(["resilient.clients.$name" => ['base_url' => $this->up->base($keys[$t]), 'headers' => ['X-Api-Key' => "key-of-$t"]]]);
            $this->assertSame(200, Resilient::client($name)->get("/client-$i")->status());
            $this->assertSame(200, Http::resilient($name)->get("/http-$i")->status());
        }
        $seen = fn (string $key, int $n) => array_map(
            fn (array $a) => $a['path'] . ' ' . ($a['headers']['x-api-key'] ?? '-'),
            $this->up->attempts($key, $n),
        );
        $this->assertSame(['/client-0 key-of-a', '/http-0 key-of-a', '/client-2 key-of-a', '/http-2 key-of-a'], $seen($keys['a'], 4));
        $this->assertSame(['/client-1 key-of-b', '/http-1 key-of-b'], $seen($keys['b'], 2));
    }

    public function testANullInAClientsEntryMeansNotSetAsInDefaults(): void
    {
        // `'base_url' => env('SHIPPING_URL')` with the variable unset gives null: the key is
        // left out (the default, or the extension's own, applies), not passed as null.
        [$name, $key, $client] = $this->upstreamClient('cfg-null', ['backoff' => ['base' => 0.001, 'cap' => 0.002]]);
        $this->up->script($key, [['status' => 503]]);
        self::env(['RESILIENT_MAX_ATTEMPTS' => '1']);
        $bare = Run::name('cfg-null-bare');
        $this->boot([
            'clients' => [
                $name => $client + ['max_attempts' => null, 'timeout' => env('RESILIENT_TEST_UNSET_TIMEOUT')],
                $bare => ['base_url' => env('RESILIENT_TEST_UNSET_URL'), 'deadline' => null],
            ],
        ] + require __DIR__ . '/../../php/config/resilient.php');

        $this->assertInstanceOf(\Resilient\Client::class, Resilient::client($bare));
        $this->assertSame(['max_attempts' => '1'], Resilient::clientConfig($bare));
        $this->assertArrayNotHasKey('timeout', Resilient::clientConfig($name));
        $this->assertSame('1', Resilient::clientConfig($name)['max_attempts'], 'the default fills a null');
        $this->assertSame(503, Http::resilient($name)->get('/one')->status());
        $this->assertCount(1, $this->up->attempts($key, 1), 'one attempt: max_attempts came from the default');
    }

    public function testEveryAttemptReachesTheEventAndTheLogChannelWithoutSecrets(): void
    {
        [$name, $key, $client] = $this->upstreamClient('cfg-attempts', ['backoff' => ['base' => 0.001, 'cap' => 0.002]]);
        $this->up->script($key, [['status' => 503], ['status' => 200]]);
        $client['base_url'] = str_replace('http://', 'http://user:pa55word@', $client['base_url']);
        $log = Run::tempDir('config') . '/attempts.log';
        $this->boot(['clients' => [$name => $client], 'log_channel' => 'attempts'], [
            'logging' => ['channels' => ['attempts' => ['driver' => 'single', 'path' => $log, 'level' => 'debug']]],
        ]);
        $events = [];
        Event::listen(AttemptMade::class, function (AttemptMade $e) use (&$events) {
            $events[] = $e;
        });

        $response = Http::resilient($name)
            ->withToken('s3cret-token')
            ->withHeaders(['Cookie' => 'sid=s3cret-cookie', 'X-Api-Key' => 's3cret-key'])
            ->get('/quote', ['token' => 's3cret-query']);

        $this->assertSame(200, $response->status());
        $this->assertCount(2, $events, 'one event per attempt');
        [$first, $second] = $events;
        $this->assertSame([$name, 'GET', 1, 503, true], [$first->client, $first->method, $first->attempt, $first->status, $first->retryFollows]);
        $this->assertSame([2, 200, false], [$second->attempt, $second->status, $second->retryFollows]);
        $this->assertSame(str_replace('user:pa55word@', '', $client['base_url']) . '/quote', $first->url);
        $lines = file($log, FILE_IGNORE_NEW_LINES);
        $this->assertCount(2, $lines);
        $this->assertStringContainsString(".WARNING: resilient $name attempt 1: GET ", $lines[0]);
        $this->assertStringContainsString(".INFO: resilient $name attempt 2: GET ", $lines[1]);
        $everything = file_get_contents($log) . serialize($events);
        foreach (['s3cret', 'pa55word', 'Bearer', 'sid='] as $secret) {
            $this->assertStringNotContainsString($secret, $everything);
        }
    }

    /**
     * The last attempt of a call that fails is a failed attempt whatever its status: a 429
     * that max_attempts ends was logged at info, beside a warning for the same call on 503.
     */
    public function testTheLastAttemptOfAFailingCallIsAWarningWhateverItsStatus(): void
    {
        [$name, $key, $client] = $this->upstreamClient('cfg-last', ['max_attempts' => 2, 'backoff' => ['base' => 0.001, 'cap' => 0.002]]);
        $this->up->script($key, [['status' => 429], ['status' => 429]], path: '/limited');
        $this->up->script($key, [['status' => 404]], path: '/missing');
        $log = Run::tempDir('config') . '/last.log';
        $this->boot(['clients' => [$name => $client], 'log_channel' => 'attempts'], [
            'logging' => ['channels' => ['attempts' => ['driver' => 'single', 'path' => $log, 'level' => 'debug']]],
        ]);
        $events = [];
        Event::listen(AttemptMade::class, function (AttemptMade $e) use (&$events) {
            $events[] = $e;
        });

        $this->assertSame(429, Http::resilient($name)->get('/limited')->status(), 'the last answer, as Laravel returns it');
        $this->assertSame(404, Http::resilient($name)->get('/missing')->status());

        $this->assertSame([false, true, false], array_map(fn (AttemptMade $e) => $e->givesUp, $events));
        $lines = file($log, FILE_IGNORE_NEW_LINES);
        $this->assertCount(3, $lines);
        $this->assertStringContainsString(".WARNING: resilient $name attempt 1: GET ", $lines[0]);
        $this->assertStringContainsString(".WARNING: resilient $name attempt 2: GET ", $lines[1], 'the call failed on it');
        $this->assertStringContainsString(".INFO: resilient $name attempt 1: GET ", $lines[2], 'a 404 is an answer');
    }

    public function testEventFakeSeesTheAttemptsAndEventsCanBeTurnedOff(): void
    {
        [$name, $key, $client] = $this->upstreamClient('cfg-eventfake');
        $this->up->script($key, [['status' => 200]]);
        $this->bootWithCache(['clients' => [$name => $client]]);
        Event::fake([AttemptMade::class]);
        Resilient::client($name)->get('/x');
        Event::assertDispatched(AttemptMade::class, fn (AttemptMade $e) => $e->client === $name && $e->status === 200);

        $off = Run::name('cfg-off');
        $this->bootWithCache(['clients' => [$off => $client], 'events' => false]);
        Event::fake([AttemptMade::class]);
        Resilient::client($off)->get('/y');
        Event::assertNotDispatched(AttemptMade::class);
        // Turned off while the app runs (a test, a tenancy bootstrapper), after the client of
        // the first name was built: its next call is not reported either (before, it was).
        $this->bootWithCache(['clients' => [$name => $client]]);
        Event::fake([AttemptMade::class]);
        Resilient::client($name)->get('/x');
        Event::assertDispatchedTimes(AttemptMade::class, 1);
        config(['resilient.events' => false]);
        Resilient::client($name)->get('/x');
        Event::assertDispatchedTimes(AttemptMade::class, 1);
    }

    /** Laravel 8's Event::fake() refreshes the cache's dispatcher, so it needs a cache. */
    private function bootWithCache(array $resilient): void
    {
        $this->boot($resilient, ['cache' => ['default' => 'array', 'stores' => ['array' => ['driver' => 'array']]]]);
        $this->app->register(\Illuminate\Cache\CacheServiceProvider::class);
    }

    public function testTheVersionConstraintIsComposersAndTheLoadedExtensionFits(): void
    {
        $composer = json_decode((string) file_get_contents(__DIR__ . '/../../php/composer.json'), true);
        $this->assertSame($composer['require']['ext-resilient'], ExtensionCheck::REQUIRED);
        $this->assertNull(ExtensionCheck::problem(), 'the extension under test fits');

        foreach ([
            ['0.1.0', '^0.1', true], ['0.1.9', '^0.1', true], ['0.2.0', '^0.1', false], ['0.0.9', '^0.1', false],
            ['1.4.0', '^1.2', true], ['2.0.0', '^1.2', false], ['0.0.3', '^0.0.3', true], ['0.0.4', '^0.0.3', false],
            ['0.3.1-dev', '^0.3', true], ['5.0.0', '*', true], ['2.1.0', '^1.0|^2.0', true],
        ] as [$version, $constraint, $fits]) {
            $this->assertSame($fits, ExtensionCheck::satisfies($version, $constraint), "$version against $constraint");
        }
        $missing = ExtensionCheck::describe(null, '^0.1', 'fpm-fcgi', '/etc/php/8.2/fpm/php.ini');
        $this->assertStringContainsString('not loaded in this PHP (' . PHP_VERSION . ' fpm-fcgi, php.ini: /etc/php/8.2/fpm/php.ini)', $missing);
        $this->assertStringContainsString('`make install`', $missing);
        $this->assertStringContainsString('`extension=resilient`', $missing);
        $this->assertStringContainsString('has resilient 0.2.0', (string) ExtensionCheck::describe('0.2.0', '^0.1', 'cli', null));
    }

    public function testWithoutTheExtensionAWebBootFailsSayingHowToInstallAndTheConsoleFailsAtFirstUse(): void
    {
        $code = self::childApp(['clients' => ['s' => []]]) . <<<'PHP'
            try {
                $app->boot();
                echo "booted\n";
                $app->make('resilient')->client('s');
            } catch (RuntimeException $e) {
                echo get_class($e), ': ', $e->getMessage(), "\n";
            }
            PHP;
        $expect = 'RuntimeException: resilient/laravel needs the resilient PHP extension (ext-resilient ^0.1), but it is not loaded';
        foreach (['false' => [$expect], 'true' => ['booted', $expect]] as $console => $lines) {
            $p = PhpProcess::code($code, [], ['RESILIENT_SO' => '/nonexistent/resilient.so', 'APP_RUNNING_IN_CONSOLE' => $console]);
            $result = $p->wait(20);
            $out = explode("\n", trim($result->stdout));
            $this->assertCount(count($lines), $out, $result->stdout . $result->stderr);
            foreach ($lines as $i => $line) {
                $this->assertStringStartsWith($line, $out[$i]);
            }
            $this->assertStringContainsString('make install', $result->stdout);
        }

        // With the extension, a web boot passes the check.
        $p = PhpProcess::code($code, [], ['APP_RUNNING_IN_CONSOLE' => 'false']);
        $result = $p->wait(20);
        $this->assertSame("booted\n", $result->stdout, $result->stderr);
    }

    /** Without the extension, resilient:status says how to install it (not "class not found"). */
    public function testStatusWithoutTheExtensionSaysSo(): void
    {
        $code = self::childApp(['clients' => ['s' => ['funnel' => ['limit' => 2]]]]) . <<<'PHP'
            $app->boot();
            foreach ([['--json' => true], ['--prometheus' => true]] as $input) {
                $command = new Resilient\Laravel\Console\StatusCommand();
                $command->setLaravel($app);
                $out = new Symfony\Component\Console\Output\BufferedOutput();
                $exit = $command->run(new Symfony\Component\Console\Input\ArrayInput($input), $out);
                echo $exit, ' ', str_replace("\n", ' ', $out->fetch()), "\n";
            }
            PHP;
        $result = PhpProcess::code($code, [], ['RESILIENT_SO' => '/nonexistent/resilient.so', 'APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $lines = explode("\n", trim($result->stdout));
        $this->assertCount(2, $lines, $result->stdout . $result->stderr);
        foreach ($lines as $line) {
            $this->assertStringStartsWith('2 ', $line);
            $this->assertStringContainsString('not loaded', $line);
        }
        // --json stays JSON for the script that reads it.
        $json = json_decode(substr($lines[0], 2), true);
        $this->assertIsArray($json, $lines[0]);
        $this->assertFalse($json['ok']);
        $this->assertStringContainsString('not loaded', $json['error']);
        $this->assertSame([], $json['names']);
    }
}
