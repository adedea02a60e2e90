<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Illuminate\Console\Command;
use Resilient\Laravel\Console\CheckCommand;
use Resilient\Laravel\Console\DoctorCommand;
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

    /**
     * A client on Redis keeps its funnel and budget there: status says so instead of reading
     * this host's (empty) counters and calling them ok, and Resilient::funnel()/budget() refuse
     * its name without showing the URL (it may hold a password). Also when `defaults` sets it.
     */
    public function testANameOnRedisIsShownAsSuchAndItsSharedMemoryObjectsAreRefused(): void
    {
        [$own, $inherited, $local, $both] = [Run::name('pay-redis'), Run::name('erp-redis'), Run::name('local'), Run::name('jobs-redis')];
        $redis = 'redis://:s3cret@127.0.0.1:' . Run::freePort() . '/0';
        $this->boot([
            'defaults' => ['backend' => $redis],
            'clients' => [
                // The scheme in any case, behind Unicode whitespace (U+00A0), as the extension takes it.
                $own => ['base_url' => 'http://127.0.0.1:1', 'backend' => "\u{a0}REDIS" . substr($redis, 5), 'funnel' => ['limit' => 2]],
                $inherited => ['base_url' => 'http://127.0.0.1:1', 'funnel' => ['limit' => 2]],
                $local => ['base_url' => 'http://127.0.0.1:1', 'backend' => ' shm', 'funnel' => ['limit' => 2]],
                $both => ['base_url' => 'http://127.0.0.1:1', 'funnel' => ['limit' => 2]],
            ],
            // This host's funnel of the same name (the jobs' one): shown as this host's.
            'funnels' => [$both => ['limit' => 3]],
        ]);
        [$exit, $json] = $this->artisan(new StatusCommand(), ['--json' => true]);
        $names = json_decode($json, true)['names'];
        foreach ([$own, $inherited] as $name) {
            $this->assertSame('redis', $names[$name]['backend'], $json);
            $this->assertSame(['on_redis' => true], $names[$name]['funnel']);
            $this->assertSame(['on_redis' => true], $names[$name]['budget']);
            foreach (['funnel', 'budget'] as $what) {
                try {
                    Resilient::$what($name);
                    $this->fail("Resilient::$what() must refuse a name on Redis");
                } catch (\InvalidArgumentException $e) {
                    $this->assertStringContainsString('on Redis', $e->getMessage());
                    $this->assertStringNotContainsString('s3cret', $e->getMessage());
                }
            }
        }
        $this->assertSame(3, $names[$both]['funnel']['limit'], $json);
        $this->assertSame(['on_redis' => true], $names[$both]['budget']);
        $this->assertSame('shm', $names[$local]['backend'], "' shm' is shm, as the extension reads it");
        $this->assertSame(2, $names[$local]['funnel']['limit']);
        $this->assertSame(2, Resilient::funnel($local)->limit());
        $this->assertStringNotContainsString('s3cret', $json);
    }

    /** An adaptive funnel is full at its learned limit (before anything is learned: `initial`), not at `max`. */
    public function testAnAdaptiveFunnelIsFullAtItsCurrentLimit(): void
    {
        $name = Run::name('auto-status');
        $this->boot(['clients' => [$name => ['base_url' => 'http://127.0.0.1:1', 'funnel' => ['limit' => 'auto', 'initial' => 2, 'max' => 32]]]]);
        $funnel = new \Resilient\Funnel($name, 32);
        $leases = [$funnel->tryAcquire(false), $funnel->tryAcquire(false)];
        $this->assertNotContains(null, $leases);
        [$exit, $json] = $this->artisan(new StatusCommand(), ['--json' => true]);
        $f = json_decode($json, true)['names'][$name]['funnel'];
        $this->assertSame(['auto', 2, true], [$f['limit'], $f['current_limit'], $f['full']], $json);
        $this->assertSame(1, $exit);
        $this->assertSame(['funnel full: 2 of 2 in flight'], json_decode($json, true)['names'][$name]['trouble']);
        foreach ($leases as $lease) {
            $lease->release();
        }
    }

    /** doctor reads each client over `defaults`, as the client runs (and as check does). */
    public function testDoctorWarnsAboutATimeoutSetInDefaultsToo(): void
    {
        foreach ([['defaults' => ['timeout' => 30]], ['clients' => [Run::name('d') => ['base_url' => 'http://127.0.0.1:1', 'timeout' => 30]]]] as $config) {
            $name = Run::name('doctor-defaults');
            $config['clients'] = ($config['clients'] ?? []) + [$name => ['base_url' => 'http://127.0.0.1:1']];
            $this->boot($config);
            [$exit, $out] = $this->artisan(new DoctorCommand(), []);
            $this->assertSame(1, $exit, $out);
            $this->assertStringContainsString('timeout 30s in config, but resilient.web_timeout', $out);
        }
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
