<?php

namespace Resilient\Laravel\Console;

use Illuminate\Console\Command;
use Resilient\Laravel\Console\Check\Finding;
use Resilient\Laravel\Console\Check\JobClasses;
use Resilient\Laravel\Console\Check\JobFacts;
use Resilient\Laravel\Console\Check\Rules;
use Resilient\Laravel\Queue\QueueSettings;
use Resilient\Laravel\Queue\ReleaseDelay;
use Resilient\Laravel\ResilientManager;
use Symfony\Component\Console\Output\OutputInterface;

/**
 * `php artisan resilient:check`: reads the queue connections, the app's job classes
 * (`resilient.check.paths`, default app/Jobs) and config/resilient.php, and reports seed 000's
 * mistakes before they reach production: timeouts that do not nest, retries in two layers (with
 * the multiplication), fixed backoff where jitter belongs. Exits 1 on any violation, for CI, and
 * 2 when it cannot check what config points it at (an empty `check.paths`, an entry that is not
 * a directory, a client entry that is not an array, a `queue.deadline_margin`,
 * `queue.worker_timeout` or `queue.release_delay` the job middleware refuses, a key of
 * config/resilient.php nothing reads, a `resilient.shm_path` the extension refuses): an empty
 * check, or one of settings that do not run as written, must not pass. What a job
 * computes at run time (a client name in a variable) is listed as not checked, without failing.
 * `--json` is written raw: a name in a finding is data, never console markup.
 */
final class CheckCommand extends Command
{
    use PlainText;

    protected $signature = 'resilient:check {--json : Print the findings as JSON}';

    protected $description = 'Check job timeouts, retries and backoff against the resilient upstream config';

    public function handle(): int
    {
        // The job funnels' options are checked by building them, as their jobs do: on a
        // stand-in before any process created the segment (built here, by an operator's user,
        // it would lock PHP-FPM's workers out: SegmentFiles::notCreatedYet()).
        try {
            $absent = class_exists(\Resilient\Funnel::class, false) ? SegmentFiles::notCreatedYet() : null;
        } catch (\RuntimeException $e) {
            // Resilient\SharedMemoryError: a `resilient.shm_path` the extension refuses.
            return $this->check('segment unusable: ' . $e->getMessage());
        }

        return $absent === null ? $this->check(null) : SegmentFiles::withStandIn($absent, fn () => $this->check(null));
    }

    /** The check and its exit code; `$segment`: why the segment cannot be used, if so. */
    private function check(?string $segment): int
    {
        $config = $this->laravel['config'];
        // The published config has `'paths' => null`: null means the default, as documented;
        // an app without app/Jobs then has no job to check (a path it named must exist).
        $configured = $config->get('resilient.check.paths');
        $default = $this->laravel->path('Jobs');
        $paths = (array) ($configured ?? (is_dir($default) ? [$default] : []));
        $errors = $segment === null ? [] : [$segment];
        // A typo (`queue.release_delays`) leaves the setting meant at its default, unchecked.
        array_push($errors, ...ConfigKeys::problems((array) $config->get('resilient', [])));
        if ($paths === [] && $configured !== null) {
            // `array_filter([env('JOBS_PATH')])` with the variable unset: nothing would be checked.
            $errors[] = 'resilient.check.paths: is empty, so no job would be checked (null checks app/Jobs)';
        }
        foreach ($paths as $i => $path) {
            if (! is_string($path)) {
                $errors[] = sprintf('resilient.check.paths.%s: must be a directory path, got %s', $i, get_debug_type($path));
                unset($paths[$i]);
            } elseif (preg_match('~^[a-z][a-z0-9+.-]*://~i', $path) === 1) {
                // A URL (a wrong env variable): is_dir() would open it through its stream wrapper
                // (a connection, or a wait), and the message would show its credentials.
                $errors[] = sprintf('resilient.check.paths.%s: must be a local directory path, not a URL', $i);
                unset($paths[$i]);
            } else {
                // A relative path is the app's (`app/Jobs`), wherever the command runs from
                // (CI and cron need not `cd` into the app).
                if (! str_starts_with($path, '/')) {
                    $paths[$i] = $path = $this->laravel->basePath($path);
                }
                if (! is_dir($path)) {
                    $errors[] = "resilient.check.paths: $path is not a directory";
                }
            }
        }
        // As the job middleware reads them at every run (a value it refuses fails every job).
        $longestRelease = ReleaseDelay::DEFAULT[1];
        try {
            $longestRelease = ReleaseDelay::configured()->max;
        } catch (\InvalidArgumentException $e) {
            $errors[] = preg_replace('/^resilient: /', '', $e->getMessage());
        }
        $queue = [];
        foreach (['deadline_margin' => 'deadlineMargin', 'worker_timeout' => 'workerTimeout'] as $key => $read) {
            try {
                $queue[$key] = QueueSettings::$read($config->get("resilient.queue.$key"));
            } catch (\InvalidArgumentException $e) {
                $errors[] = $e->getMessage();
                $queue[$key] = QueueSettings::$read(null);
            }
        }
        // Each client as it runs: its entry over `defaults`.
        $manager = $this->laravel->make(ResilientManager::class);
        $problems = [];
        $clients = $manager->clientConfigs($problems);
        // A client entry the app cannot build: the check would not be of the config that runs.
        array_push($errors, ...$problems);
        // Entries left out above, and those every call refuses: their jobs are told why.
        $entries = $config->get('resilient.clients', []);
        $broken = array_diff_key(is_array($entries) ? $entries : [], $clients);
        foreach (ClientProblems::of($manager, array_keys($clients)) as $name => $problem) {
            $errors[] = $problem;
            $broken[$name] = true;
        }
        $rules = new Rules(
            $clients,
            (array) $config->get('queue', []),
            $queue['worker_timeout'],
            $queue['deadline_margin'],
            function (string $name) use ($manager) {
                try {
                    return $manager->funnelOptions($name);
                } catch (\RuntimeException $e) {
                    // Resilient\SharedMemoryError (`resilient.shm_required=1`): every run throws it.
                    throw new \InvalidArgumentException('segment unusable: ' . $e->getMessage(), 0, $e);
                }
            },
            $longestRelease,
            // As text: an int key ('100') is no other name ('1e2') in a loose comparison.
            array_map('strval', array_keys($broken)),
        );

        $jobs = JobClasses::in($paths, $errors);
        $findings = [];
        $unchecked = [];
        foreach ($jobs as $class) {
            $facts = JobFacts::of($class);
            $findings = [...$findings, ...$rules->check($facts)];
            foreach ($facts->unchecked as $what) {
                $unchecked[] = ['job' => $class, 'what' => $what];
            }
        }
        $exit = $errors !== [] ? 2 : ($findings === [] ? 0 : 1);

        if ($this->option('json')) {
            $this->output->writeln(json_encode([
                'ok' => $exit === 0,
                'jobs' => $jobs,
                'findings' => array_map(fn (Finding $f) => $f->toArray(), $findings),
                'unchecked' => $unchecked,
            ] + ($errors === [] ? [] : ['errors' => $errors]), JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), OutputInterface::OUTPUT_RAW);

            return $exit;
        }

        foreach ($errors as $error) {
            $this->error("error: $error");
        }
        if ($jobs === []) {
            if (($found = array_filter($paths, fn ($path) => is_dir((string) $path))) !== []) {
                $this->line('No queued job classes under ' . implode(', ', $found) . '.');
            }

            return $exit;
        }
        foreach ($jobs as $class) {
            $mine = array_filter($findings, fn (Finding $f) => $f->job === $class);
            if ($mine === []) {
                $this->line("ok    $class");
            }
            foreach ($mine as $f) {
                $this->error("FAIL  $class [{$f->rule}] {$f->message}");
            }
            foreach (array_filter($unchecked, fn (array $u) => $u['job'] === $class) as $u) {
                $this->line("note  $class: not checked: {$u['what']}");
            }
        }
        $this->line(sprintf('%d job(s) checked, %d violation(s).', count($jobs), count($findings)));

        return $exit;
    }
}
