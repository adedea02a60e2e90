<?php

namespace Resilient\Laravel\Console;

use Illuminate\Console\Command;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Laravel\ResilientManager;
use Symfony\Component\Console\Output\OutputInterface;

/**
 * `php artisan resilient:status [--json] [--prometheus]`: per configured name, the funnel's limit and reserve,
 * the leases held now by every process of the host, and the retry budget's window. Exits 1 when
 * a funnel is full or a budget is spent, so a health check or a deploy script can act on it
 * (as `horizon:status` does). `--json` and `--prometheus` are written raw: a name is data, never
 * console markup (`pay<info>v2</info>` stays as it is).
 */
final class StatusCommand extends Command
{
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
            $this->output->write(\Resilient\Metrics::prometheus(), false, OutputInterface::OUTPUT_RAW);

            return 0;
        }

        if (($problem = ExtensionCheck::problem()) !== null) {
            $this->error($problem);

            return 2;
        }
        $status = UpstreamStatus::of(
            (array) $this->laravel['config']->get('resilient', []),
            $this->laravel->make(ResilientManager::class),
        );
        $trouble = array_filter($status, fn ($s) => $s['trouble'] !== []);

        if ($this->option('json')) {
            $this->output->writeln(json_encode(['ok' => $trouble === [], 'names' => (object) $status], JSON_PRETTY_PRINT | JSON_UNESCAPED_SLASHES), OutputInterface::OUTPUT_RAW);

            return $trouble === [] ? 0 : 1;
        }

        if ($status === []) {
            $this->line('No clients, funnels or budgets in config/resilient.php.');

            return 0;
        }

        $rows = [];
        foreach ($status as $name => $s) {
            $f = $s['funnel'];
            $b = $s['budget'];
            $rows[] = [
                $name,
                match (true) {
                    $f === null => '-',
                    isset($f['on_redis']) => 'on Redis',
                    default => ($f['limit'] === 'auto' ? "auto (now {$f['current_limit']})" : $f['limit']) . " ({$f['reserve']} reserved for web)",
                },
                $f === null || isset($f['on_redis']) ? '-' : "{$f['in_flight']}" . ($f['background_full'] && ! $f['full'] ? ' (no slot for workers)' : ''),
                match (true) {
                    $b === null => '-',
                    isset($b['on_redis']) => 'on Redis',
                    default => sprintf('%d originals, %d retries of %.1f allowed in %gs', $b['originals'], $b['retries'], $b['allowed'], $b['window']),
                },
                $s['trouble'] === [] ? 'ok' : implode('; ', $s['trouble']),
            ];
        }
        $this->table(['name', 'funnel limit', 'in flight (host)', 'retry budget', 'state'], $rows);

        return $trouble === [] ? 0 : 1;
    }
}
