<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Resilient\Laravel\Console\StatusCommand;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * `resilient:status` when what it would show is not what runs: a funnel entry that throws at
 * every use, and a segment this process cannot use (its counters are then its own, not the host's).
 */
final class StatusEdgeCasesTest extends PackageTestCase
{
    /** Each of these throws at every Resilient::funnel() / Queue\Funnel: status says so, naming the entry. */
    public function testAFunnelEntryThatCannotBeBuiltIsTrouble(): void
    {
        [$w, $r, $n, $c, $a] = [Run::name('sw'), Run::name('sr'), Run::name('sn'), Run::name('sc'), Run::name('sa')];
        $this->boot([
            'funnels' => [
                $w => ['limit' => 3, 'reserve' => 1, 'wait' => 0.05],
                $r => ['limit' => 2, 'reserve' => 2],
                $n => ['reserve' => 1],
                // a learned limit is the client's alone: Resilient::funnel() refuses it
                $a => ['limit' => 'auto'],
            ],
            // A fixed funnel whose limit is an unset env(): not a learned one.
            'clients' => [$c => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => null, 'reserve' => 1]]],
        ]);
        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $names = json_decode($out, true)['names'];
        $this->assertSame(["resilient.funnels.$w: unknown key 'wait' (a Funnel takes limit, reserve, lease, share)"], $names[$w]['trouble']);
        $this->assertSame(["resilient.funnels.$r: reserve: must be between 0 and limit - 1 (1), got 2"], $names[$r]['trouble']);
        $this->assertSame(["resilient.funnels.$n: 'limit' is required"], $names[$n]['trouble']);
        $this->assertStringStartsWith("resilient.funnels.$a: 'limit' => 'auto' is a client's learned limit", $names[$a]['trouble'][0] ?? '(no trouble)');
        $this->assertSame(["resilient.clients.$c.funnel: 'limit' is required"], $names[$c]['trouble'], $out);
        $this->assertArrayNotHasKey('limit', $names[$c]['funnel'], 'not shown as a learned (auto) funnel');
    }

    /**
     * With the segment unusable (a directory that does not exist, a file it refuses) every
     * process counts alone: the numbers are this process's own, so status must not say "ok".
     */
    public function testAnUnusableSegmentIsSaidAndExitsTwo(): void
    {
        $code = self::childApp([
            'funnels' => ['sap' => ['limit' => 3, 'reserve' => 1]],
            'clients' => ['s' => ['base_url' => 'http://127.0.0.1:9']],
        ]) . <<<'PHP'
            $app->boot();
            foreach ([['--json' => true], []] as $input) {
                $command = new Resilient\Laravel\Console\StatusCommand();
                $command->setLaravel($app);
                $out = new Symfony\Component\Console\Output\BufferedOutput();
                $exit = $command->run(new Symfony\Component\Console\Input\ArrayInput($input), $out);
                echo "exit $exit\n", $out->fetch(), "\n";
            }
            PHP;
        $corrupt = Run::shmPath('status-corrupt');   // the run's cleanup removes it
        file_put_contents($corrupt, str_repeat('x', 4096));
        chmod($corrupt, 0600);
        foreach (['/nonexistent/dir/x.shm' => 'cannot create', $corrupt => $corrupt] as $path => $why) {
            $result = PhpProcess::code($code, ['extension' => 'intl', 'resilient.shm_path' => $path], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
            [$json, $text] = explode("exit ", substr($result->stdout, strlen('exit ')), 2) + [1 => ''];
            $this->assertStringStartsWith('2', $json, $result->describe());
            $data = json_decode(substr($json, 2), true);
            $this->assertFalse($data['ok'], $json);
            $this->assertStringContainsString($why, $data['degraded']);
            foreach (['sap', 's'] as $name) {
                $this->assertContains("degraded: this process's own counters, not the host's", $data['names'][$name]['trouble']);
            }
            $this->assertStringStartsWith('2', $text, $result->describe());
            $this->assertStringContainsString("segment unusable: shared memory segment $path", $text);
            $this->assertStringContainsString('this process\'s own counters, not the host\'s', $text);
            $this->assertDoesNotMatchRegularExpression('/\|\s*ok\s*\|/', $text);
        }
    }

    /**
     * Before any process of the host used resilient, its segment does not exist. Status, its
     * `--prometheus` form, doctor and check say so or check on a stand-in, and leave it absent:
     * the segment is created 0600 by the first process that opens it, so an operator's `php
     * artisan resilient:status` run as root before the first web request, with a
     * `resilient.shm_path` shared with PHP-FPM, would lock every FPM worker out of it (each would
     * then count alone). Before, `resilient:check` created it, building a job's funnel.
     */
    public function testAnAbsentSegmentIsSaidAndNotCreated(): void
    {
        // In a folder of its own: the stand-ins beside it are this test's alone.
        $path = Run::tempDir('status-absent') . '/segment.shm';
        [$result, $json, $text, $prometheus, $doctor, $check] = $this->everyCommand([
            'funnels' => ['sap' => ['limit' => 3, 'reserve' => 1]],
            'clients' => ['s' => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['ratio' => 0.1]]],
        ], $path);
        $this->assertFileDoesNotExist($path, $result->describe());
        $this->assertStringStartsWith('0', $json, $result->describe());
        $data = json_decode(substr($json, 2), true);
        $this->assertTrue($data['ok'], $json);
        $this->assertFalse($data['segment_created'], $json);
        // What the config asks for, and nothing held or spent.
        $this->assertSame(3, $data['names']['sap']['funnel']['limit'], $json);
        $this->assertSame(0, $data['names']['sap']['funnel']['in_flight'], $json);
        $this->assertSame(0, $data['names']['s']['budget']['retries'], $json);
        $this->assertStringStartsWith('0', $text, $result->describe());
        $this->assertStringContainsString("No segment yet ($path)", $text);
        $this->assertMatchesRegularExpression('/\\|\s*sap\s*\|\s*3 \\(1 reserved for web\\)\s*\|\s*0\s*\|/', $text);
        $this->assertSame([], glob(dirname($path) . '/resilient-standin-*.shm'), 'the stand-in is removed');
        $this->assertSame("0\n\n", $prometheus, 'an empty exposition: no counter was ever written');
        $this->assertStringContainsString("segment    $path (not created yet", $doctor);
        $this->assertStringStartsWith('0', $check, $result->describe());
        $this->assertSame(['StatusEdge\\SapJob'], json_decode(substr($check, 2), true)['jobs'], $check);
    }

    /**
     * A `resilient.shm_path` the extension refuses (relative): every command says so, status
     * exits 2 (`--json` still JSON), doctor reports it as an error and goes on, check reports
     * it as an error. Before, each stopped with the extension's exception.
     */
    public function testARefusedSegmentPathIsSaidByEveryCommand(): void
    {
        [$result, $json, $text, $prometheus, $doctor, $check] = $this->everyCommand([
            'funnels' => ['sap' => ['limit' => 3]],
            'clients' => ['s' => ['base_url' => 'http://127.0.0.1:9']],
        ], 'relative.shm');
        $why = 'resilient.shm_path';
        $this->assertStringStartsWith('2', $json, $result->describe());
        $data = json_decode(substr($json, 2), true);
        $this->assertFalse($data['ok'], $json);
        $this->assertStringContainsString($why, $data['degraded']);
        $this->assertStringStartsWith('2', $text);
        $this->assertStringContainsString("segment unusable: ", $text);
        $this->assertStringStartsWith('2', $prometheus);
        $this->assertStringStartsWith('1', $doctor);
        $this->assertStringContainsString('error: segment unusable: ', $doctor);
        $this->assertMatchesRegularExpression('/\n\d+ problem\(s\) found\.\n/', $doctor);
        $this->assertStringStartsWith('2', $check);
        $errors = json_decode(substr($check, 2), true)['errors'] ?? [];
        $this->assertStringContainsString($why, implode("\n", $errors), $check);
    }

    /**
     * Status (`--json`, plain, `--prometheus`), doctor and check `--json` in a child app with
     * `$resilient` and one job through the funnel `sap`, at `resilient.shm_path` = `$shmPath`:
     * the process, then each command's output after its exit code ("N\n...").
     */
    private function everyCommand(array $resilient, string $shmPath): array
    {
        $jobs = self::jobWithAFunnel('sap');
        $code = self::childApp($resilient + ['check' => ['paths' => [$jobs]]]) . "require '$jobs/SapJob.php';\n" . <<<'PHP'
            $app->boot();
            foreach ([
                [Resilient\Laravel\Console\StatusCommand::class, ['--json' => true]],
                [Resilient\Laravel\Console\StatusCommand::class, []],
                [Resilient\Laravel\Console\StatusCommand::class, ['--prometheus' => true]],
                [Resilient\Laravel\Console\DoctorCommand::class, []],
                [Resilient\Laravel\Console\CheckCommand::class, ['--json' => true]],
            ] as [$class, $input]) {
                $command = new $class();
                $command->setLaravel($app);
                $out = new Symfony\Component\Console\Output\BufferedOutput();
                try {
                    $exit = $command->run(new Symfony\Component\Console\Input\ArrayInput($input), $out);
                    echo "--- exit $exit\n", $out->fetch(), "\n";
                } catch (Throwable $e) {
                    echo '--- thrown ', get_class($e), ': ', $e->getMessage(), "\n";
                }
            }
            PHP;
        $result = PhpProcess::code($code, ['extension' => 'intl', 'resilient.shm_path' => $shmPath], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $this->assertStringNotContainsString('--- thrown', $result->stdout, $result->describe());

        return [$result, ...array_slice(explode('--- exit ', $result->stdout) + [5 => ''], 1, 5)];
    }

    /** A folder with one queued job, `StatusEdge\SapJob`, through the funnel `$name`. */
    private static function jobWithAFunnel(string $name): string
    {
        $dir = Run::tempDir('status-jobs');
        file_put_contents("$dir/SapJob.php", "<?php\n\nnamespace StatusEdge;\n\n"
            . "use Illuminate\\Contracts\\Queue\\ShouldQueue;\nuse Resilient\\Laravel\\Queue\\Funnel;\n"
            . "final class SapJob implements ShouldQueue\n{\n    use \\Illuminate\\Queue\\InteractsWithQueue, \\Resilient\\Laravel\\Queue\\JitteredBackoff;\n"
            . "    public \$timeout = 20;\n    public \$tries = 11;\n"
            . "    public function middleware(): array { return [new Funnel('$name')]; }\n"
            . "    public function handle(): void { }\n}\n");

        return $dir;
    }

    /**
     * A budget entry that cannot build the RetryBudget its users build, or a client entry that
     * is not an array, is trouble on its own row, naming the entry; every other row is still
     * shown and `--json` is still JSON (before, status stopped with the extension's exception).
     */
    public function testABudgetOrClientEntryThatCannotBeBuiltIsTroubleOnItsRow(): void
    {
        [$ok, $zero, $neg, $typo, $text, $null] = [Run::name('bok'), Run::name('bz'), Run::name('bn'), Run::name('bt'), Run::name('bs'), Run::name('cn')];
        $this->boot([
            'clients' => [
                $ok => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 4]],
                $zero => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['ratio' => 0.1, 'window' => 0]],
                $null => null,
            ],
            'budgets' => [
                $neg => ['ratio' => -1, 'floor' => 5, 'window' => 60],
                $typo => ['ratoi' => 0.1],
                $text => ['ratio' => 'abc'],
            ],
        ]);
        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $names = json_decode($out, true)['names'] ?? $this->fail($out);
        $this->assertSame([], $names[$ok]['trouble']);
        $this->assertSame(["resilient.clients.$zero.budget: window: must be greater than zero"], $names[$zero]['trouble']);
        $this->assertSame(["resilient.budgets.$neg: ratio: must be a finite number >= 0, got -1"], $names[$neg]['trouble']);
        $this->assertSame(["resilient.budgets.$typo: unknown key 'ratoi' (a RetryBudget takes ratio, floor, window)"], $names[$typo]['trouble']);
        $this->assertStringStartsWith("resilient.budgets.$text: ", $names[$text]['trouble'][0] ?? '(no trouble)');
        $this->assertSame(["resilient.clients.$null: must be an array of client options, got null"], $names[$null]['trouble']);
        $this->assertSame(60.0, (float) $names[$ok]['budget']['window'], 'the healthy client still shows its budget');
    }

    /**
     * A client whose `funnel` or `budget` is of a type the client refuses throws at every call:
     * its row says so in the client's words (before: "ok", or for a learned funnel's `max` a
     * limit of 0 that is in no config).
     */
    public function testAClientFunnelOrBudgetOfTheWrongTypeIsTroubleInTheClientsWords(): void
    {
        [$f, $b, $m, $ok] = [Run::name('tf'), Run::name('tb'), Run::name('tm'), Run::name('tok')];
        $this->boot(['clients' => [
            $f => ['base_url' => 'http://127.0.0.1:9', 'funnel' => 'ten'],
            $b => ['base_url' => 'http://127.0.0.1:9', 'budget' => 'x'],
            $m => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 'auto', 'max' => 'x']],
            $ok => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 'auto', 'max' => '8'], 'budget' => false],
        ]]);
        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $names = json_decode($out, true)['names'] ?? $this->fail($out);
        $this->assertSame(["resilient.clients.$f: option 'funnel' must be of type array, string given"], $names[$f]['trouble']);
        $this->assertSame(["resilient.clients.$b: option 'budget' must be of type array, string given"], $names[$b]['trouble']);
        $this->assertSame(["resilient.clients.$m: option 'funnel.max' must be of type int, string given"], $names[$m]['trouble']);
        $this->assertSame([], $names[$ok]['trouble'], 'a numeric string is a number, as for the client');
        $this->assertSame('auto', $names[$ok]['funnel']['limit']);
        $this->assertLessThanOrEqual(8, $names[$ok]['funnel']['current_limit'], "its 'max' of '8' bounds it");
    }

    /**
     * A client on Redis is built as any other (building one does not connect, so with Redis
     * down too): a config that cannot build it is trouble on its row, in the client's words,
     * and exit 1. Before, every client on Redis was "ok".
     */
    public function testAClientOnRedisWhoseConfigCannotBuildTheClientIsTrouble(): void
    {
        [$auto, $obe, $tmo, $port, $ok] = [Run::name('ra'), Run::name('ro'), Run::name('rt'), Run::name('rp'), Run::name('rok')];
        $down = 'redis://:s3cret@127.0.0.1:' . Run::freePort() . '/0';   // nothing listens there
        $this->boot([
            'defaults' => ['backend' => $down],
            'clients' => [
                $auto => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 'auto']],
                $obe => ['base_url' => 'http://127.0.0.1:9', 'on_backend_error' => 'explode'],
                $tmo => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 'abc'],
                $port => ['base_url' => 'http://127.0.0.1:9', 'backend' => 'redis://:s3cret@127.0.0.1:notaport/0'],
                $ok => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 2]],
            ],
        ]);
        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $names = json_decode($out, true)['names'] ?? $this->fail($out);
        foreach ([$auto, $obe, $tmo, $port, $ok] as $name) {
            $this->assertSame('redis', $names[$name]['backend'], $name);
        }
        $this->assertStringStartsWith("resilient.clients.$auto: option 'funnel.limit': 'auto' is not available with the redis backend", $names[$auto]['trouble'][0] ?? '(no trouble)');
        $this->assertSame(["resilient.clients.$obe: option 'on_backend_error': must be 'local', 'open' or 'closed', got \"explode\""], $names[$obe]['trouble']);
        $this->assertSame(["resilient.clients.$tmo: option 'timeout' must be of type float, string given"], $names[$tmo]['trouble']);
        $this->assertStringStartsWith("resilient.clients.$port: option 'backend': is not a valid Redis URL", $names[$port]['trouble'][0] ?? '(no trouble)');
        $this->assertSame([], $names[$ok]['trouble'], 'a client that builds is ok with Redis down');
        $this->assertSame(['on_redis' => true], $names[$ok]['funnel']);
        $this->assertStringNotContainsString('s3cret', $out);
    }

    /**
     * A client whose circuit breaker is open has its calls refused: trouble on its row, in
     * `--json` and in the exit code, as a full funnel is (before: "ok", exit 0). One whose
     * breaker is closed is ok; `--prometheus` exits 0 as before.
     */
    public function testAnOpenCircuitBreakerIsTrouble(): void
    {
        $circuit = ['max_attempts' => 1, 'circuit' => ['min_calls' => 2, 'open_for' => 300]];
        [$open, $openKey, $openClient] = $this->upstreamClient('st-open', $circuit);
        [$calm, $calmKey, $calmClient] = $this->upstreamClient('st-calm', $circuit);
        $this->boot(['clients' => [$open => $openClient, $calm => $calmClient]]);
        $this->up->script($openKey, [['status' => 503]]);
        $this->up->script($calmKey, [['status' => 200]]);
        $thrown = [];
        for ($i = 0; $i < 3; $i++) {
            try {
                \Resilient\Laravel\Facades\Resilient::client($open)->get('/x');
            } catch (\Resilient\Unavailable $e) {
                $thrown[] = get_class($e);
            }
            \Resilient\Laravel\Facades\Resilient::client($calm)->get('/x');
        }
        $this->assertSame(['Resilient\\UpstreamFailed', 'Resilient\\UpstreamFailed', 'Resilient\\CircuitOpen'], $thrown);

        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $data = json_decode($out, true);
        $this->assertFalse($data['ok']);
        $this->assertSame(['circuit breaker open: calls are refused until its open_for ends, then the next one probes the upstream'], $data['names'][$open]['trouble']);
        $this->assertSame([], $data['names'][$calm]['trouble']);

        // The table in a child (Symfony's needs intl), on the same segment.
        $code = self::childApp(['clients' => [$open => $openClient, $calm => $calmClient]]) . self::commandInChild(StatusCommand::class);
        $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $this->assertStringStartsWith("exit 1\n", $result->stdout, $result->describe());
        $this->assertMatchesRegularExpression('/\| ' . preg_quote($open, '/') . ' .*\| circuit breaker open: /', $result->stdout);
        $this->assertMatchesRegularExpression('/\| ' . preg_quote($calm, '/') . ' .*\| ok\s+\|/', $result->stdout);

        [$exit, $out] = $this->status(['--prometheus' => true]);
        $this->assertSame(0, $exit, $out);
    }

    /**
     * A retry budget is its name and its window: a client's `budget` and a `budgets` entry of
     * the same name with another window are two budgets, counted apart. Status shows the one
     * the client spends (it showed the entry's, nothing spent, while the client's was spent)
     * and the entry beside it, each saying where it comes from. With one window and another
     * floor they share counters but allow other retries: both shown too. An entry that is the
     * client's budget is shown once; beside a client on Redis it is this host's, shown too.
     */
    public function testAClientBudgetAndABudgetsEntryThatDifferAreBothShown(): void
    {
        $fast = ['max_attempts' => 3, 'backoff' => ['base' => 0.001, 'cap' => 0.002]];
        [$two, $key, $twoClient] = $this->upstreamClient('st-2win', $fast + ['budget' => ['ratio' => 0.1, 'floor' => 1, 'window' => 60.0]]);
        [$judged, $same, $far] = [Run::name('st-judged'), Run::name('st-same'), Run::name('st-far')];
        $config = [
            'clients' => [
                $two => $twoClient,
                $judged => ['base_url' => 'http://127.0.0.1:9'],   // the default budget: floor 5
                $same => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['floor' => 1]],
                $far => ['base_url' => 'http://127.0.0.1:9', 'backend' => 'redis://127.0.0.1:' . Run::freePort() . '/0'],
            ],
            'budgets' => [
                $two => ['ratio' => 0.1, 'floor' => 1, 'window' => 30.0],
                $judged => ['ratio' => 0.1, 'floor' => 2, 'window' => 60.0],
                $same => [0.1, 'floor' => 1],
                $far => ['window' => 30.0],
            ],
        ];
        $this->boot($config);
        $this->up->script($key, [['status' => 503]]);
        for ($i = 0; $i < 3; $i++) {
            try {
                \Resilient\Laravel\Facades\Resilient::client($two)->get('/x');
            } catch (\Resilient\Unavailable) {
            }
        }
        // One retry through the entry: the client's budget of that window counts it too.
        $this->assertTrue((new \Resilient\RetryBudget($judged, 0.1, 2, 60.0))->tryConsume());

        [$exit, $out] = $this->status(['--json' => true]);
        $this->assertSame(1, $exit, $out);
        $names = json_decode($out, true)['names'] ?? $this->fail($out);
        $pick = fn (?array $b) => $b === null ? null : [(float) $b['window'], $b['originals'], $b['retries'], (float) $b['allowed'], $b['spent'], $b['from']];
        $this->assertSame([60.0, 3, 1, 1.3, true, "resilient.clients.$two.budget"], $pick($names[$two]['budget']), $out);
        $this->assertSame([30.0, 0, 0, 1.0, false, "resilient.budgets.$two"], $pick($names[$two]['budgets_entry']), $out);
        $this->assertSame(["retry budget spent (resilient.clients.$two.budget): 1 retries of 1.3 allowed"], $names[$two]['trouble']);
        $this->assertSame([60.0, 0, 1, 5.0, false, "resilient.clients.$judged.budget"], $pick($names[$judged]['budget']), $out);
        $this->assertSame([60.0, 0, 1, 2.0, false, "resilient.budgets.$judged"], $pick($names[$judged]['budgets_entry']), $out);
        $this->assertSame([], $names[$judged]['trouble']);
        $this->assertSame([60.0, 0, 0, 1.0, false, "resilient.clients.$same.budget"], $pick($names[$same]['budget']), $out);
        $this->assertNull($names[$same]['budgets_entry'], 'the same budget, shown once');
        $this->assertSame(['on_redis' => true], $names[$far]['budget'], $out);
        $this->assertSame([30.0, 0, 0, 5.0, false, "resilient.budgets.$far"], $pick($names[$far]['budgets_entry']), $out);
        $this->assertSame([], $names[$far]['trouble']);

        // Resilient::budget() is the `budgets` entry, whatever the client's (README).
        $this->assertSame(30.0, \Resilient\Laravel\Facades\Resilient::budget($two)->stats()['window']);

        // The table in a child (Symfony's needs intl), on the same segment.
        $code = self::childApp($config) . self::commandInChild(StatusCommand::class);
        $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $this->assertStringStartsWith("exit 1\n", $result->stdout, $result->describe());
        $this->assertStringContainsString('client: 3 originals, 1 retries of 1.3 allowed in 60s', $result->stdout);
        $this->assertStringContainsString("budgets.$two: 0 originals, 0 retries of 1.0 allowed in 30s", $result->stdout);
        $this->assertStringContainsString("budgets.$judged: 0 originals, 1 retries of 2.0 allowed in 60s", $result->stdout);
    }

    /**
     * A name is text in the table too, never console markup: `pay<fg=green>v2</>` was shown as
     * `payv2`, a row for a name that does not exist.
     */
    public function testANameIsShownAsWrittenNotAsMarkup(): void
    {
        $names = [Run::name('pay') . '<fg=green>v2</>', '<comment>' . Run::name('billing') . '</comment>'];
        $code = self::childApp(['funnels' => array_fill_keys($names, ['limit' => 3])]) . self::commandInChild(StatusCommand::class);
        $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $this->assertStringStartsWith("exit 0\n", $result->stdout, $result->describe());
        foreach ($names as $name) {
            $this->assertStringContainsString("| $name ", $result->stdout);
        }
    }

    /** @return array{0: int, 1: string} */
    private function status(array $input): array
    {
        $command = new StatusCommand();
        $command->setLaravel($this->app);
        $output = new BufferedOutput();
        $exit = $command->run(new ArrayInput($input), $output);

        return [$exit, $output->fetch()];
    }
}
