<?php

namespace Resilient\Laravel\Console;

use Illuminate\Console\Command;
use Resilient\Context;
use Resilient\Funnel;
use Resilient\Laravel\ResilientManager;

/**
 * `php artisan resilient:doctor`: is the extension loaded, which version, which SAPI and context
 * this process counts as, which segment file it shares and whether it really shares it, which
 * backend is in effect (a password masked) and whether its Redis answers; warns when other users
 * have segments (their processes share no limit with this one), when it runs as root (a segment
 * root creates locks FPM workers of another user out, so it names one that root already owns at
 * the configured path), when config/resilient.php has keys nothing reads and when the php.ini
 * web caps cut what config asks for, and when a `budgets` entry and the client of its name have
 * budgets that differ. Exits 1 when anything is flagged; a segment file of another
 * build's layout is warned about without failing (every upgrade of the layout has one until the
 * other build's processes are restarted).
 *
 * It reads this CLI's ini; php-fpm reads its own php.ini and pool files, so compare with
 * `php-fpm -i` or a page calling phpinfo() when they may differ.
 */
final class DoctorCommand extends Command
{
    use PlainText;

    protected $signature = 'resilient:doctor';

    protected $description = 'Check the resilient extension, its shared-memory segment and the ini caps';

    private int $problems = 0;

    /** @var array<string, true> the problems said so far */
    private array $said = [];

    public function handle(): int
    {
        if (! extension_loaded('resilient')) {
            $this->problem('error', 'the resilient extension is not loaded in this PHP (' . PHP_BINARY . '): add extension=resilient to its php.ini (see README "Install")');

            return 1;
        }
        $this->line('extension  resilient ' . phpversion('resilient'));
        $this->line('sapi       ' . PHP_SAPI . ' → ' . (Context::isWeb() ? 'web' : 'console (background caller: limit - reserve slots)')
            . $this->contextSetting());
        if (($problem = ResilientManager::contextProblem()) !== null) {
            $this->problem('error', $problem);
        }

        $this->segment();
        // Each client as it runs: its entry over `defaults` (as resilient:check reads them).
        $problems = [];
        $manager = $this->laravel->make(ResilientManager::class);
        $clients = $manager->clientConfigs($problems);
        $this->backend($clients);
        array_push($problems, ...ConfigKeys::problems((array) $this->laravel['config']->get('resilient', [])));
        foreach ($problems as $problem) {
            $this->problem('error', $problem);
        }
        // A client its config cannot build throws at every call (as resilient:status says).
        foreach (ClientProblems::of($manager, array_keys($clients)) as $problem) {
            $this->problem('error', $problem);
        }
        $this->budgetMismatches($manager, $clients);
        $this->webCaps($clients);
        $this->logChannel();

        $this->line($this->problems === 0 ? 'No problems found.' : "{$this->problems} problem(s) found.");

        return $this->problems === 0 ? 0 : 1;
    }

    /**
     * A `budgets` entry whose client spends another budget (resilient:status shows both):
     * another window is another budget, counted apart (the window is part of a budget's
     * identity); another ratio or floor judges the same counters differently. A client on Redis
     * is left out: its budget is there, and a `budgets` entry is the way to one of this host.
     */
    private function budgetMismatches(ResilientManager $manager, array $clients): void
    {
        try {
            $entries = ResilientManager::sectionOf((array) $this->laravel['config']->get('resilient', []), 'budgets');
        } catch (\InvalidArgumentException) {
            // Not an array: every budget throws that, as resilient:status says.
            return;
        }
        $shown = fn (array $v): string => sprintf('ratio %g, floor %g, window %g s', $v['ratio'], $v['floor'], $v['window']);
        foreach ($clients as $name => $options) {
            if (! array_key_exists($name, $entries) || $manager->onRedis((string) $name)
                || ($own = UpstreamStatus::clientBudget($options)) === null) {
                continue;
            }
            [$ownKey, $entryKey] = ["resilient.clients.$name.budget", "resilient.budgets.$name"];
            $a = UpstreamStatus::budgetValues($ownKey, $own);
            $b = UpstreamStatus::budgetValues($entryKey, $entries[$name]);
            // One that cannot build a budget is an error of its own.
            if ($a === null || $b === null || UpstreamStatus::sameBudget($a, $b)) {
                continue;
            }
            $both = sprintf('%s (%s%s) and %s (%s)', $ownKey, array_key_exists('budget', $options) ? '' : 'not set: ', $shown($a), $entryKey, $shown($b));
            $this->problem('warning', $a['window'] !== $b['window']
                ? "$both are two retry budgets: a budget is its name and its window, so the client's retries and those of "
                    . "Resilient::budget('$name') count apart; give both the same values, or the entry a name of its own"
                : "$both count in one retry budget but allow other retries: the client by its ratio and floor, "
                    . "Resilient::budget('$name') by the entry's; give both the same values");
        }
    }

    private function contextSetting(): string
    {
        $ini = ini_get('resilient.context');

        return is_string($ini) ? " (resilient.context = $ini)" : '';
    }

    private function segment(): void
    {
        try {
            $path = SegmentFiles::path();
            $absent = SegmentFiles::notCreatedYet();
        } catch (\RuntimeException $e) {
            // Resilient\SharedMemoryError: a `resilient.shm_path` the extension refuses.
            $this->problem('error', 'segment unusable: ' . $e->getMessage());

            return;
        }
        if ($absent === null) {
            [$reason, $required] = $this->open();
            $d = SegmentFiles::describe($path);
            $this->line($d['exists']
                ? sprintf('segment    %s owner %s mode %s size %d bytes', $path, $d['owner'], $d['mode'], $d['size'])
                : "segment    $path (not created: its folder is missing or not writable)");
        } else {
            // Checked on a stand-in beside it: opening it would create it for this user.
            [$reason, $required] = SegmentFiles::withStandIn($path, fn () => $this->open());
            $this->line("segment    $path (not created yet: the first process that uses resilient creates it, mode 0600 for its user;"
                . ' a stand-in beside it was created and used)');
        }
        if ($reason !== null) {
            $this->problem('error', "segment unusable, funnels and budgets count this process only: $reason");
        }
        if ($required !== null) {
            $this->problem('error', "segment unusable: $required (every funnel and budget, and every client with one, throws)");
        }
        foreach (SegmentFiles::ofOtherUsers($path) as $other) {
            $this->problem('warning', sprintf(
                'segment %s belongs to %s (uid %d), this process runs as %s (uid %d): their processes '
                . '(e.g. FPM workers) and these (e.g. queue workers) share no funnel and no retry budget; '
                . 'run both as one user (e.g. `sudo -u www-data php artisan …`)',
                $other['path'], $other['owner'], $other['uid'], SegmentFiles::userName(SegmentFiles::uid()), SegmentFiles::uid(),
            ));
        }
        foreach (($layout = SegmentFiles::layout()) === null ? [] : SegmentFiles::ofOtherLayouts($path, $layout) as $other) {
            // Not counted: every deploy that changes the layout has one until the processes of
            // the other build are restarted.
            $this->warn(sprintf(
                'warning: segment %s is of shared-memory layout version %d, this build\'s is %d: processes of %s count there, '
                . 'apart from this build\'s (a funnel\'s limit can be reached once in each file, a retry budget spent twice); '
                . 'once no process uses it (restart PHP-FPM and the queue workers; `fuser %s` then prints no process), remove it',
                $other['path'], $other['layout'], $layout,
                $other['layout'] < $layout
                    ? 'an older build (e.g. a queue worker not restarted since the deploy)'
                    : 'a newer build (this PHP loads the older one: is it the one PHP-FPM and the queue workers load?)',
                $other['path'],
            ));
        }
        if (SegmentFiles::runsAsRoot()) {
            $this->problem('warning', ($owned = SegmentFiles::sharedPathOwnedByRoot()) !== null
                ? "segment $owned (resilient.shm_path) is root's: FPM workers of another user cannot use it and count alone; "
                    . 'stop the root processes using it, remove the file and run artisan as the FPM user (e.g. `sudo -u www-data php artisan …`)'
                : "this process runs as root: a segment it creates is root's (mode 0600), which FPM workers of another user cannot share "
                    . '(they would count alone); run artisan as the FPM user (e.g. `sudo -u www-data php artisan …`)');
        }
    }

    /**
     * Opens this process's segment: [why it is unusable (its guards count this process only),
     * the error that makes every use throw], each null when there is none.
     *
     * @return array{0: ?string, 1: ?string}
     */
    private function open(): array
    {
        try {
            return [Funnel::degradedReason(), null];
        } catch (\RuntimeException $e) {
            // Resilient\SharedMemoryError (resilient.shm_required=1, or a refused shm_* value):
            // this check's error, as resilient:status reports it; the rest of the report runs.
            return [null, $e->getMessage()];
        }
    }

    /**
     * The backend in effect: `resilient.backend` as `php --ri resilient` shows it (a password
     * masked by the extension), then each Redis URL clients take from config instead (their
     * `backend` option, e.g. RESILIENT_BACKEND through `defaults`: never shown, it may hold a
     * password). For each Redis, whether it answers.
     */
    private function backend(array $clients): void
    {
        $ini = trim((string) ini_get('resilient.backend'));
        // Never the setting itself when the extension's masked words cannot be read.
        $shown = ExtensionInfo::value('resilient.backend')
            ?? (ResilientManager::isRedisUrl($ini) ? 'a Redis URL (not shown: it may hold a password)' : $ini);
        if (ResilientManager::isRedisUrl($ini)) {
            $this->redis("$shown (resilient.backend)", 'Redis (resilient.backend)', []);
        } else {
            $this->line("backend    $shown (resilient.backend)");
        }
        // A refused value reads as the default here (and is a note in parentheses there): its
        // refusal, as every client throws it, from a validator bound to nothing shared.
        if (str_starts_with($shown, '(') && ! ResilientManager::isRedisUrl($ini) && method_exists(\Resilient\Client::class, 'validator')) {
            try {
                \Resilient\Client::validator('resilient-doctor');
            } catch (\Exception|\ValueError|\TypeError $e) {
                $this->problem('error', $e->getMessage());
            }
        }

        $others = [];
        foreach ($clients as $name => $options) {
            $backend = is_array($options) && is_string($options['backend'] ?? null) ? trim($options['backend']) : null;
            if ($backend !== null && $backend !== $ini && ResilientManager::isRedisUrl($backend)) {
                $others[$backend][] = (string) $name;
            }
        }
        foreach ($others as $backend => $names) {
            [$who, $its] = count($names) === 1 ? ["client {$names[0]}", 'its'] : ['clients ' . implode(', ', $names), 'their'];
            $this->redis("$who: a Redis URL from $its `backend` option (not shown)", "Redis of $who ($its `backend` option)", ['backend' => $backend]);
        }
    }

    /**
     * Prints `$shown` and whether the Redis of $options (else of `resilient.backend`) answers:
     * one retry-budget decision, under `on_backend_error` 'closed' so that a Redis that cannot
     * answer denies it at once rather than falling back. It waits no longer than the URL's
     * `timeout` (0.25 s unless set), as any call does.
     */
    private function redis(string $shown, string $which, array $options): void
    {
        if (! method_exists(\Resilient\Client::class, 'benchBackend')) {
            $this->line("backend    $shown: not asked (this build of the extension cannot)");

            return;
        }
        try {
            // The extension's one call that asks the backend and sends nothing upstream; its
            // keys on Redis expire a second later.
            $answers = \Resilient\Client::benchBackend('resilient-doctor', $options + [
                'on_backend_error' => 'closed',
                'budget' => ['ratio' => 0.1, 'floor' => 100, 'window' => 1.0],
            ], 'budget', 1) === 1;
        } catch (\Exception|\ValueError|\TypeError $e) {
            // The extension's words never show the URL.
            $this->line("backend    $shown");
            $this->problem('error', "$which unusable: " . $e->getMessage());

            return;
        }
        if ($answers) {
            $this->line("backend    $shown: Redis answers");

            return;
        }
        $this->line("backend    $shown");
        $this->problem('error', "$which did not answer within its timeout, or refused this process (e.g. a wrong password): "
            . 'until it does, the clients on it follow their on_backend_error (default: this host\'s shared memory)');
    }

    /** Options that a web SAPI caps with the ini values, so web requests get less than config says. */
    private function webCaps(array $clients): void
    {
        $caps = [
            'timeout' => ['resilient.web_timeout', 10.0, 's'],
            'connect_timeout' => ['resilient.web_connect_timeout', 3.0, 's'],
            'max_attempts' => ['resilient.web_max_attempts', 1, ' attempt(s)'],
        ];
        $this->line(sprintf('web caps   timeout %s s, connect_timeout %s s, max_attempts %s (as this CLI reads them)',
            ...array_map(fn ($c) => ini_get($c[0]) === false ? $c[1] : ini_get($c[0]), array_values($caps))));
        foreach ($clients as $name => $options) {
            // A context that is no string was said above (the client's own error).
            if (! is_array($options) || ! is_string($options['context'] ?? '')
                || ResilientManager::contextName($options['context'] ?? '') === 'console') {
                continue;
            }
            foreach ($caps as $option => [$ini, $default, $unit]) {
                if (! isset($options[$option]) || ! is_numeric($options[$option])) {
                    continue;
                }
                $cap = ini_get($ini);
                $cap = is_numeric($cap) ? (float) $cap : (float) $default;
                if ((float) $options[$option] <= $cap) {
                    continue;
                }
                if ($option === 'max_attempts') {
                    // No retry while a user waits is the design: a note, not a problem.
                    $this->line(sprintf('note       client %s: max_attempts %s, under php-fpm %d (%s): no retry while a user waits',
                        $name, $options[$option], (int) $cap, $ini));
                    continue;
                }
                $this->problem('warning', sprintf('client %s: %s %s%s in config, but %s = %s: under php-fpm it gets %s%s',
                    $name, $option, $options[$option], $unit, $ini, $cap, $cap, $unit));
            }
        }
    }

    /**
     * A `log_channel` config/logging.php does not define: Laravel's LogManager then writes
     * every line to its emergency logger (with an error line of its own), not to the channel
     * meant. Only judged when the app has logging channels to compare with.
     */
    private function logChannel(): void
    {
        $config = $this->laravel['config'];
        $channel = $config->get('resilient.log_channel');
        $channels = $config->get('logging.channels');
        // Found as LogManager finds it: a dot path (`ops.http` is `channels.ops.http`).
        if (! is_string($channel) || $channel === '' || ! is_array($channels) || $config->get("logging.channels.$channel") !== null) {
            return;
        }
        $this->problem('warning', sprintf("resilient.log_channel: '%s' is no channel of config/logging.php (known: %s): "
            . 'Laravel writes its lines to the emergency logger instead', $channel, implode(', ', array_keys($channels))));
    }

    private function problem(string $level, string $message): void
    {
        // One config mistake can reach two checks (a bad log_channel: the config's keys, and
        // every client built with it): said once.
        if (isset($this->said[$message])) {
            return;
        }
        $this->said[$message] = true;
        $this->problems++;
        $level === 'error' ? $this->error("$level: $message") : $this->warn("$level: $message");
    }
}
