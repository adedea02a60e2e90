<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Console\Command;
use Resilient\Laravel\Console\CheckCommand;
use Resilient\Laravel\Console\StatusCommand;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Tests\Harness\Run;
use Resilient\UpstreamFailed;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * The machine-readable outputs of the Artisan commands (`--json`, `--prometheus`) are data:
 * written as they are, never read as console markup. In process, as Symfony Console runs them.
 */
final class CommandOutputTest extends PackageTestCase
{
    public function testJsonAndPrometheusKeepANameThatLooksLikeMarkup(): void
    {
        $name = Run::name('pay<info>v2</info>');
        $this->boot(['clients' => [$name => ['base_url' => 'http://127.0.0.1:' . Run::freePort(), 'max_attempts' => 1]]]);
        try {
            Resilient::client($name)->get('/x');   // refused: the name gets metrics
        } catch (UpstreamFailed) {
        }

        [, $json] = $this->artisan(new StatusCommand(), ['--json' => true]);
        $this->assertArrayHasKey($name, json_decode($json, true)['names']);

        [, $prometheus] = $this->artisan(new StatusCommand(), ['--prometheus' => true]);
        $this->assertStringContainsString('upstream="' . $name . '"', $prometheus);

        // resilient:check --json: a finding naming the client.
        $dir = Run::tempDir('check-jobs');
        $class = 'MarkupJob' . bin2hex(random_bytes(3));
        file_put_contents("$dir/$class.php", "<?php\nclass $class implements Illuminate\\Contracts\\Queue\\ShouldQueue\n"
            . "{\n    public function handle() { Resilient::client('other<info>x</info>'); }\n}\n");
        require "$dir/$class.php";
        $this->app['config']->set('resilient.check.paths', [$dir]);
        [$exit, $check] = $this->artisan(new CheckCommand(), ['--json' => true]);
        $this->assertSame(1, $exit);
        $this->assertStringContainsString("calls client 'other<info>x</info>'", json_decode($check, true)['findings'][0]['message']);
    }

    /** @return array{0: int, 1: string} exit code and output */
    private function artisan(Command $command, array $input): array
    {
        $command->setLaravel($this->app);
        $output = new BufferedOutput();
        $exit = $command->run(new ArrayInput($input), $output);

        return [$exit, $output->fetch()];
    }
}
