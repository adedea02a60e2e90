<?php

namespace Resilient\Laravel\Console;

use Illuminate\Console\Command;
use Resilient\Funnel;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Laravel\ResilientManager;
use Symfony\Component\Console\Output\OutputInterface;

/**
 * `php artisan resilient:status [--json] [--prometheus]`: per configured name, the funnel's limit and reserve,
 * the leases held now by every process of the host, and the retry budget's window (the client's,
 * and beside it a `budgets` entry of the name that is another budget). Exits 1 when
 * a funnel is full, a budget is spent, a circuit breaker is open or a funnel entry cannot be
 * built, so a health check or a deploy script can act on it (as `horizon:status` does); 2 when
 * the host's state cannot be read (no extension, or an unusable segment: the counters are then
 * this process's own).
 * A name is data, never console markup (`pay<info>v2</info>` stays as it is): escaped in the
 * table (PlainText), `--json` and `--prometheus` written raw. A segment no process created yet is said, not created
 * (see SegmentFiles::notCreatedYet()). Run as root, the table is preceded by a warning (a
 * segment root creates locks FPM workers of another user out; resilient:doctor says more).
 */
final class StatusCommand extends Command
{
    use PlainText;

    protected $signature = 'resilient:status
        {--json : Print the state as JSON}
        {--prometheus : Print Resilient\\Metrics::prometheus() (the text exposition format) instead}';

    protected $description = 'Show the host-wide funnels and retry budgets of the configured upstreams';

    public function handle(): int
    {
        if ($this->option('prometheus')) {
            if (! extension_loaded('resilient')) {
                $this->error((string) ExtensionCheck::problem());

                return 2;
            }
            if (! class_exists('Resilient\\Metrics')) {
                $this->error('resilient:status --prometheus needs an extension with Resilient\\Metrics (resilient >= the metrics release)');

                return 2;
            }
            try {
                if (SegmentFiles::notCreatedYet() !== null) {
                    // No process wrote a counter yet: an empty exposition, and the file left absent.
                    return 0;
                }
                $text = \Resilient\Metrics::prometheus();
            } catch (\RuntimeException $e) {
                // Resilient\SharedMemoryError: the segment is unusable, and this process's own
                // counters are not the host's.
                $this->error('segment unusable: ' . $e->getMessage());

                return 2;
            }
            $this->output->write($text, false, OutputInterface::OUTPUT_RAW);

            return 0;
        }

        if (($problem = ExtensionCheck::problem()) !== null) {
            $this->option('json')
                ? $this->output->writeln(json_encode(['ok' => false, 'error' => $problem, 'names' => (object) []], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), OutputInterface::OUTPUT_RAW)
                : $this->error($problem);

            return 2;
        }
        // Before any process used resilient here, the state is read from a stand-in segment: the
        // config's limits, nothing held, nothing spent; opening the real one would create it.
        try {
            $absent = SegmentFiles::notCreatedYet();
        } catch (\RuntimeException $e) {
            // Resilient\SharedMemoryError: a `resilient.shm_path` the extension refuses.
            return $this->unusable($e->getMessage());
        }

        return $absent === null ? $this->report(null) : SegmentFiles::withStandIn($absent, fn () => $this->report($absent));
    }

    /** No state to show: the segment cannot be used at all. Exit 2, as for a missing extension. */
    private function unusable(string $why): int
    {
        $this->option('json')
            ? $this->output->writeln(json_encode(['ok' => false, 'degraded' => $why, 'names' => (object) []], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), OutputInterface::OUTPUT_RAW)
            : $this->error('segment unusable: ' . $why);

        return 2;
    }

    /** The report and its exit code; `$absent`: the segment's path when no process created it yet. */
    private function report(?string $absent): int
    {
        // An unusable segment (degraded mode): every count below is this process's own, which
        // says nothing about the host. Exit 2, as for a missing extension: the state is unknown.
        try {
            $degraded = Funnel::degradedReason();
        } catch (\RuntimeException $e) {
            // Resilient\SharedMemoryError (resilient.shm_required=1): not even this process's counters.
            return $this->unusable($e->getMessage());
        }
        $config = (array) $this->laravel['config']->get('resilient', []);
        // On a stand-in, a manager of its own: the app's keeps the clients it builds, and one
        // built on the stand-in would count on it after the command (a worker that runs it).
        try {
            $status = UpstreamStatus::of($config, $absent === null
                ? $this->laravel->make(ResilientManager::class)
                : new ResilientManager($config, extensionProblem: ExtensionCheck::problem()));
        } catch (\InvalidArgumentException $e) {
            // A section that is no array of entries (`'funnels' => 'sap'`): no name to show.
            $this->option('json')
                ? $this->output->writeln(json_encode(['ok' => false, 'error' => $e->getMessage(), 'names' => (object) []], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), OutputInterface::OUTPUT_RAW)
                : $this->error($e->getMessage());

            return 2;
        }
        if ($degraded !== null) {
            foreach ($status as &$s) {
                $s['trouble'][] = "degraded: this process's own counters, not the host's";
            }
            unset($s);
        }
        $trouble = array_filter($status, fn ($s) => $s['trouble'] !== []);
        $exit = $degraded !== null ? 2 : ($trouble === [] ? 0 : 1);

        if ($this->option('json')) {
            // A name that is not UTF-8 is written with U+FFFD rather than failing the whole output.
            $this->output->writeln(json_encode(['ok' => $exit === 0, 'degraded' => $degraded, 'segment_created' => $absent === null, 'names' => (object) $status], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES | JSON_INVALID_UTF8_SUBSTITUTE), OutputInterface::OUTPUT_RAW);

            return $exit;
        }

        if ($absent !== null) {
            $this->line("No segment yet ($absent): no process of this user has used resilient on this host since boot (or since the file was removed), so nothing is held and no budget is spent. This command does not create it.");
        }
        if ($degraded !== null) {
            $this->error("segment unusable: $degraded: every number below is this process's own counters, not the host's (see resilient:doctor)");
        }
        if (SegmentFiles::runsAsRoot()) {
            // On a stand-in (`$absent`) there is no segment of root's to name.
            $this->warn($absent === null && ($owned = SegmentFiles::sharedPathOwnedByRoot()) !== null
                ? "warning: running as root: segment $owned is root's, FPM workers of another user cannot use it (see resilient:doctor)"
                : 'warning: running as root: a segment it creates cannot be shared with FPM workers of another user (see resilient:doctor)');
        }
        if ($status === []) {
            $this->line('No clients, funnels or budgets in config/resilient.php.');

            return $exit;
        }

        $budget = fn (?array $b): string => match (true) {
            $b === null => '-',
            isset($b['error']) => 'invalid',
            isset($b['on_redis']) => 'on Redis',
            default => sprintf('%d originals, %d retries of %.1f allowed in %gs', $b['originals'], $b['retries'], $b['allowed'], $b['window']),
        };
        $rows = [];
        foreach ($status as $name => $s) {
            $f = $s['funnel'];
            $rows[] = [
                $name,
                match (true) {
                    $f === null => '-',
                    isset($f['error']) => 'invalid',
                    isset($f['on_redis']) => 'on Redis',
                    default => ($f['limit'] === 'auto' ? "auto (now {$f['current_limit']})" : $f['limit']) . " ({$f['reserve']} reserved for web)",
                },
                $f === null || isset($f['on_redis']) || isset($f['error']) ? '-' : "{$f['in_flight']}" . ($f['background_full'] && ! $f['full'] ? ' (no slot for workers)' : ''),
                // A `budgets` entry that is another budget than the client's: both, each labelled.
                $s['budgets_entry'] === null ? $budget($s['budget'])
                    : "client: {$budget($s['budget'])}\nbudgets.$name: {$budget($s['budgets_entry'])}",
                $s['trouble'] === [] ? 'ok' : implode('; ', $s['trouble']),
            ];
        }
        $this->table(['name', 'funnel limit', $degraded === null ? 'in flight (host)' : 'in flight (this process)', 'retry budget', 'state'], $rows);

        return $exit;
    }
}
