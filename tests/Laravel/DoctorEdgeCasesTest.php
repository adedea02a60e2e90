<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Resilient\Laravel\Console\DoctorCommand;
use Resilient\Tests\Harness\PhpProcess;

/** `resilient:doctor` when what it checks is broken: it names the problem and goes on with the report. */
final class DoctorEdgeCasesTest extends PackageTestCase
{
    /** A client whose config cannot build the client (it throws at every call) is an error, as in resilient:status. */
    public function testAClientItsConfigCannotBuildIsAnError(): void
    {
        $code = self::childApp([
            'clients' => [
                'ok' => ['base_url' => 'http://127.0.0.1:9'],
                'bad' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 'abc'],
            ],
        ]) . self::commandInChild(DoctorCommand::class);
        $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $out = $result->stdout;
        $this->assertStringStartsWith("exit 1\n", $out, $result->describe());
        $this->assertStringContainsString("error: resilient.clients.bad: option 'timeout' must be of type float, string given", $out);
        $this->assertStringNotContainsString('resilient.clients.ok', $out);
    }

    /**
     * A `log_channel` that config/logging.php does not define: Laravel writes each line to its
     * emergency logger with an error of its own, so the channel meant never sees one. Doctor
     * warns; a defined channel, none, or an app without logging config (nothing to compare
     * with) is no problem.
     */
    public function testALogChannelLoggingDoesNotDefineIsAWarning(): void
    {
        $cases = [
            ['slak', ['stack' => [], 'slack' => []], "warning: resilient.log_channel: 'slak' is no channel of config/logging.php (known: stack, slack): Laravel writes its lines to the emergency logger instead\n"],
            ['slack', ['stack' => [], 'slack' => []], null],
            [null, ['stack' => []], null],
            ['slack', null, null],
            // Looked up as Laravel's LogManager looks it up: a dot path.
            ['ops.http', ['ops' => ['http' => []]], null],
            ['ops.http', ['ops.http' => []], "warning: resilient.log_channel: 'ops.http' is no channel of config/logging.php (known: ops.http): Laravel writes its lines to the emergency logger instead\n"],
        ];
        foreach ($cases as [$channel, $channels, $warning]) {
            $code = self::childApp(['log_channel' => $channel, 'clients' => ['ok' => ['base_url' => 'http://127.0.0.1:9']]])
                . ($channels === null ? '' : '$app["config"]->set("logging.channels", ' . var_export($channels, true) . ');')
                . self::commandInChild(DoctorCommand::class);
            $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
            $out = $result->stdout;
            $this->assertStringStartsWith('exit ', $out, $result->describe());
            if ($warning === null) {
                $this->assertStringNotContainsString('log_channel', $out);
            } else {
                $this->assertStringStartsWith("exit 1\n", $out, $result->describe());
                $this->assertStringContainsString($warning, $out);
            }
        }
    }

    /**
     * A client's budget and a `budgets` entry of its name that differ are a warning naming
     * both: with another window they are two budgets counted apart, with another floor or
     * ratio one budget judged two ways. Not when they are the same budget, when the client
     * has none, or keeps it on Redis (the entry is then this host's, as the README suggests).
     */
    public function testABudgetsEntryThatDiffersFromTheClientsBudgetIsAWarning(): void
    {
        $redis = 'redis://127.0.0.1:' . \Resilient\Tests\Harness\Run::freePort() . '/0';
        $code = self::childApp([
            'clients' => [
                'win' => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['ratio' => 0.1, 'floor' => 1, 'window' => 60.0]],
                'floor' => ['base_url' => 'http://127.0.0.1:9'],
                'same' => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['floor' => 2]],
                'off' => ['base_url' => 'http://127.0.0.1:9', 'budget' => false],
                'far' => ['base_url' => 'http://127.0.0.1:9', 'backend' => $redis],
            ],
            'budgets' => [
                'win' => ['ratio' => 0.1, 'floor' => 1, 'window' => 30.0],
                'floor' => [0.1, 2],
                'same' => ['ratio' => 0.1, 'floor' => 2, 'window' => 60],
                'off' => ['window' => 30.0],
                'far' => ['window' => 30.0],
            ],
        ]) . self::commandInChild(DoctorCommand::class);
        $result = PhpProcess::code($code, ['extension' => 'intl'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $out = $result->stdout;
        $this->assertStringStartsWith("exit 1\n", $out, $result->describe());
        $this->assertStringContainsString('warning: resilient.clients.win.budget (ratio 0.1, floor 1, window 60 s) and resilient.budgets.win '
            . '(ratio 0.1, floor 1, window 30 s) are two retry budgets: a budget is its name and its window, so the client\'s retries '
            . 'and those of Resilient::budget(\'win\') count apart; give both the same values, or the entry a name of its own', $out);
        $this->assertStringContainsString('warning: resilient.clients.floor.budget (not set: ratio 0.1, floor 5, window 60 s) and '
            . 'resilient.budgets.floor (ratio 0.1, floor 2, window 60 s) count in one retry budget but allow other retries: '
            . 'the client by its ratio and floor, Resilient::budget(\'floor\') by the entry\'s; give both the same values', $out);
        foreach (['same', 'off', 'far'] as $name) {
            $this->assertStringNotContainsString("resilient.budgets.$name", $out);
        }
    }

    /**
     * With `resilient.shm_required=1` a segment that cannot be opened throws (SharedMemoryError):
     * doctor reports it as an error and still prints the rest (before, it stopped with the
     * exception, exit 1 and no report).
     */
    public function testASegmentThatCannotBeOpenedIsAnErrorAndTheReportGoesOn(): void
    {
        $code = self::childApp([
            'clients' => [
                's' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 30],
                // A name is text, never console markup.
                '<comment>b</comment>' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 30],
            ],
        ]) . self::commandInChild(DoctorCommand::class);
        $path = '/nonexistent/dir/x.shm';
        $result = PhpProcess::code($code, ['extension' => 'intl', 'resilient.shm_path' => $path, 'resilient.shm_required' => '1'], ['APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $out = $result->stdout;
        $this->assertStringStartsWith("exit 1\n", $out, $result->describe());
        $this->assertStringContainsString("segment    $path (not created: its folder is missing or not writable)", $out);
        $this->assertStringContainsString("error: segment unusable: shared memory segment $path: cannot create", $out);
        // The rest of the report.
        $this->assertStringContainsString('web caps   timeout', $out);
        $this->assertStringContainsString('warning: client s: timeout 30s in config, but resilient.web_timeout = 10', $out);
        $this->assertStringContainsString('warning: client <comment>b</comment>: timeout 30s in config', $out);
        // (a segment of another user, left by another test of the run, may add a warning)
        $this->assertMatchesRegularExpression('/\n\d+ problem\(s\) found\.\n$/', $out);
    }
}
