<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Console\Command;
use Illuminate\Support\Facades\Http;
use Resilient\Laravel\Console\CheckCommand;
use Resilient\Laravel\Console\DoctorCommand;
use Resilient\Laravel\Console\StatusCommand;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Response;
use Resilient\Tests\Harness\Run;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * Config values of the wrong type, as a fuzz of config/resilient.php found them: each is a clear
 * exception naming the key (never PHP's "Array to string conversion" from inside the package,
 * nor a crash of an artisan command), and the commands report it with their exit code.
 */
final class ConfigValuesTest extends PackageTestCase
{
    /** A base URL that is no string: the client's words, through every door and under the fakes. */
    public function testABaseUrlThatIsNoStringIsTheClientsTypeError(): void
    {
        $this->boot(['clients' => ['x' => ['base_url' => ['http://h']], 'o' => ['base_url' => new \stdClass()]]]);
        $message = fn (string $name, string $type) => "resilient.clients.$name: option 'base_url' must be of type string, $type given";
        foreach (['x' => 'array', 'o' => 'stdClass'] as $name => $type) {
            foreach ([
                'client' => fn () => Resilient::client($name)->get('/a'),
                'Http::resilient' => fn () => Http::resilient($name)->get('/a'),
            ] as $door => $call) {
                foreach (['real' => null, 'Resilient::fake()' => fn () => Resilient::fake()] as $mode => $fake) {
                    $this->boot(['clients' => ['x' => ['base_url' => ['http://h']], 'o' => ['base_url' => new \stdClass()]]]);
                    $fake && $fake();
                    try {
                        $call();
                        $this->fail("$door ($mode): accepted");
                    } catch (\TypeError $e) {
                        $this->assertSame($message($name, $type), $e->getMessage(), "$door ($mode)");
                    }
                }
            }
        }
    }

    /** Under the fake, an entry that is no array is refused as without it. */
    public function testUnderTheFakeAnEntryThatIsNoArrayIsRefusedAsWithoutIt(): void
    {
        $this->boot(['clients' => ['z' => new \stdClass()]]);
        Resilient::fake();
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('resilient.clients.z: must be an array of client options, got stdClass');
        Resilient::client('z');
    }

    /** A log channel that is no name: every call says so, and doctor says it once. */
    public function testALogChannelThatIsNoNameIsNamedByEveryCallAndByDoctorOnce(): void
    {
        $this->boot(['log_channel' => ['single'], 'clients' => ['ok' => ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1]]]);
        $said = "resilient.log_channel: must be a log channel's name (a string), or null for none, got array";
        foreach (['client' => fn () => Resilient::client('ok')->get('/a'), 'Http::resilient' => fn () => Http::resilient('ok')->get('/a')] as $door => $call) {
            try {
                $call();
                $this->fail("$door: accepted");
            } catch (\InvalidArgumentException $e) {
                $this->assertSame($said, $e->getMessage(), $door);
            }
        }
        [$exit, $out] = $this->artisan(new DoctorCommand(), []);
        $this->assertSame(1, $exit, $out);
        $this->assertSame(1, substr_count($out, "error: $said"), $out);
    }

    /** Doctor read a client's `context` as text before anything checked it. */
    public function testDoctorReportsAContextThatIsNoStringWithoutCrashing(): void
    {
        $this->boot(['clients' => ['x' => ['base_url' => 'http://127.0.0.1:9', 'context' => ['web']]]]);
        [$exit, $out] = $this->artisan(new DoctorCommand(), []);
        $this->assertSame(1, $exit, $out);
        $this->assertStringContainsString("error: resilient.clients.x: option 'context' must be of type string, array given", $out);
    }

    /** A `funnels` or `budgets` section that is no array: status says so (its JSON too), doctor and check report it. */
    public function testASectionThatIsNoArrayIsReportedByEveryCommand(): void
    {
        foreach (['funnels', 'budgets'] as $section) {
            $said = "resilient.$section: must be an array of entries by name, got string";
            $this->boot([$section => 'sap', 'check' => ['paths' => [Run::tempDir('check-empty')]]]);
            [$exit, $json] = $this->artisan(new StatusCommand(), ['--json' => true]);
            $this->assertSame(2, $exit, $json);
            $this->assertSame(['ok' => false, 'error' => $said, 'names' => []], json_decode($json, true), $json);
            [$exit, $out] = $this->artisan(new StatusCommand(), []);
            $this->assertSame(2, $exit, $out);
            $this->assertStringContainsString($said, $out);
            [$exit, $out] = $this->artisan(new DoctorCommand(), []);
            $this->assertSame(1, $exit, $out);
            $this->assertStringContainsString("error: $said", $out);
            [$exit, $out] = $this->artisan(new CheckCommand(), ['--json' => true]);
            $this->assertSame(2, $exit, $out);
            $this->assertContains($said, json_decode($out, true)['errors'] ?? [], $out);
        }
    }

    /**
     * A URL among the check paths (a wrong env variable) is refused without being opened (an
     * ftp:// one waited for its host; a redis:// one threw from is_dir()) or shown (its password).
     */
    public function testACheckPathThatIsAUrlIsRefusedUnopenedAndUnshown(): void
    {
        $this->boot(['check' => ['paths' => ['redis://:s3cr3tPw@host:6379', 'ftp://u:s3cr3tPw@10.255.255.1/x']]]);
        $started = microtime(true);
        [$exit, $out] = $this->artisan(new CheckCommand(), ['--json' => true]);
        $this->assertLessThan(10.0, microtime(true) - $started, 'a path was opened');
        $this->assertSame(2, $exit, $out);
        $this->assertSame([
            'resilient.check.paths.0: must be a local directory path, not a URL',
            'resilient.check.paths.1: must be a local directory path, not a URL',
        ], json_decode($out, true)['errors'] ?? null, $out);
        $this->assertStringNotContainsString('s3cr3t', $out);
    }

    /**
     * Under the fake, an exception's trace kept the closures the fake was handed, and through
     * them the call's headers and the config's (`zend.exception_ignore_args=0`, PHP's default).
     */
    public function testUnderTheFakeAnExceptionsTraceHoldsNoHeaderValue(): void
    {
        $previous = ini_set('zend.exception_ignore_args', '0');
        try {
            $this->boot(['clients' => ['a' => [
                'base_url' => 'http://127.0.0.1:' . Run::freePort(), 'max_attempts' => 1, 'headers' => ['X-Api-Key' => 'CONFIGs3cr3t'],
            ]]]);
            Resilient::fake(['other' => Response::fake(200)]);
            try {
                Resilient::client('a')->get('/x', null, ['headers' => ['Authorization' => 'Bearer CALLs3cr3t']]);
                $this->fail('a stray call to a closed port answered');
            } catch (\Resilient\UpstreamFailed $e) {
                // The package's frames (the test's own, PHPUnit's above them, hold the config).
                $ours = array_filter($e->getTrace(), fn (array $frame) => str_contains($frame['file'] ?? '', '/php/src/'));
                $this->assertNotEmpty($ours);
                $this->assertStringNotContainsString('s3cr3t', print_r($ours, true));
            }
            [[$request, $outcome]] = Resilient::recorded();
            $this->assertStringNotContainsString('s3cr3t', print_r($request, true));
            $this->assertSame($e, $outcome);
        } finally {
            ini_set('zend.exception_ignore_args', (string) $previous);
        }
    }

    /** @return array{0: int, 1: string} */
    private function artisan(Command $command, array $input): array
    {
        $command->setLaravel($this->app);
        $output = new BufferedOutput();
        $exit = $command->run(new ArrayInput($input), $output);

        return [$exit, $output->fetch()];
    }
}
