<?php

namespace Resilient\Laravel\Console;

use Illuminate\Console\Command;
use Resilient\Laravel\Console\Check\Finding;
use Resilient\Laravel\Console\Check\JobClasses;
use Resilient\Laravel\Console\Check\JobFacts;
use Resilient\Laravel\Console\Check\Rules;
use Resilient\Laravel\ResilientManager;
use Symfony\Component\Console\Output\OutputInterface;

/**
 * `php artisan resilient:check`: reads the queue connections, the app's job classes
 * (`resilient.check.paths`, default app/Jobs) and config/resilient.php, and reports seed 000's
 * mistakes before they reach production: timeouts that do not nest, retries in two layers (with
 * the multiplication), fixed backoff where jitter belongs. Exits 1 on any violation, for CI.
 * `--json` is written raw: a name in a finding is data, never console markup.
 */
final class CheckCommand extends Command
{
    protected $signature = 'resilient:check {--json : Print the findings as JSON}';

    protected $description = 'Check job timeouts, retries and backoff against the resilient upstream config';

    public function handle(): int
    {
        $config = $this->laravel['config'];
        // The published config has `'paths' => null`: null means the default, as documented.
        $paths = (array) ($config->get('resilient.check.paths') ?? [$this->laravel->path('Jobs')]);
        // Each client as it runs: its entry over `defaults`.
        $manager = $this->laravel->make(ResilientManager::class);
        $rules = new Rules(
            $manager->clientConfigs(),
            (array) $config->get('queue', []),
            // Empty or not a number (`RESILIENT_WORKER_TIMEOUT=`): queue:work's default.
            is_numeric($t = $config->get('resilient.queue.worker_timeout')) ? (float) $t : 60.0,
            is_numeric($m = $config->get('resilient.queue.deadline_margin')) ? (float) $m : null,
            fn (string $name) => $manager->funnelOptions($name),
        );

        $jobs = JobClasses::in($paths);
        $findings = [];
        foreach ($jobs as $class) {
            $findings = [...$findings, ...$rules->check(JobFacts::of($class))];
        }

        if ($this->option('json')) {
            $this->output->writeln(json_encode([
                'ok' => $findings === [],
                'jobs' => $jobs,
                'findings' => array_map(fn (Finding $f) => $f->toArray(), $findings),
            ], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), OutputInterface::OUTPUT_RAW);

            return $findings === [] ? 0 : 1;
        }

        if ($jobs === []) {
            $this->line('No queued job classes under ' . implode(', ', $paths) . '.');

            return 0;
        }
        foreach ($jobs as $class) {
            $mine = array_filter($findings, fn (Finding $f) => $f->job === $class);
            if ($mine === []) {
                $this->line("ok    $class");
            }
            foreach ($mine as $f) {
                $this->error("FAIL  $class [{$f->rule}] {$f->message}");
            }
        }
        $this->line(sprintf('%d job(s) checked, %d violation(s).', count($jobs), count($findings)));

        return $findings === [] ? 0 : 1;
    }
}
