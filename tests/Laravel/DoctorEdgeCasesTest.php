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
