<?php

namespace Resilient\Laravel\Console\Check;

/**
 * The rules resilient:check applies to one job, from seed 000:
 *
 * - nesting: HTTP time in the job < the job's `$timeout` < the connection's `retry_after`
 *   (past `$timeout` the worker kills the job mid-write; past `retry_after` another worker
 *   takes the same job while the first still runs);
 * - one retry owner: a client making several attempts inside a job that is itself tried several
 *   times multiplies the calls the upstream receives (a job with `retryUntil()` is tried until
 *   then, whatever its `$tries`: Laravel's worker reads only the one);
 * - jitter: a fixed backoff brings every job that failed together back at the same second;
 * - released without tries: a job our middleware puts back on the queue (each release a try,
 *   Laravel's rule) that may run only once fails when taken after its first release, and one
 *   whose tries last less than RELEASES_FOR of releases fails while a funnel stays full (the
 *   load a funnel is for);
 * - cannot be released: a job our middleware puts back on the queue has no release()
 *   (InteractsWithQueue), so each refusal fails the run instead;
 * - job funnel: a Queue\\Funnel middleware whose name config cannot turn into a funnel (none
 *   defined, a client's on Redis or learned, a `funnels` entry a Funnel refuses) would throw at
 *   every run of the job.
 */
final class Rules
{
    /**
     * The least time a released job's tries should keep it through releases (each at most
     * `resilient.queue.release_delay`'s max): a funnel full for a few minutes is an ordinary
     * incident, not a reason to fail the job.
     */
    public const RELEASES_FOR = 300;

    /** Drivers whose `retry_after` defaults to 60 s in Laravel when the config omits it. */
    private const RETRY_AFTER_DRIVERS = ['redis', 'database', 'beanstalkd'];

    public function __construct(
        private array $clients,
        private array $queue,
        private float $workerTimeout,
        private ?float $deadlineMargin,
        /** Resolves a funnel name as Queue\\Funnel does; throws InvalidArgumentException. */
        private ?\Closure $funnelOptions = null,
        /** The longest release of a refused job (`resilient.queue.release_delay`'s max), s. */
        private int $longestRelease = 30,
        /** @var list<string> clients whose entry every call refuses (reported as errors) */
        private array $broken = [],
    ) {
    }

    /** @return list<Finding> */
    public function check(JobFacts $job): array
    {
        return [
            ...$this->unknownClients($job), ...$this->nesting($job), ...$this->twoLayers($job), ...$this->jitter($job),
            ...$this->releasedWithoutTries($job), ...$this->notReleasable($job), ...$this->funnels($job),
        ];
    }

    /** `X puts` or `X and Y put`: what releases the job, with its verb. */
    private static function puts(array $releasedBy): string
    {
        return implode(' and ', $releasedBy) . (count($releasedBy) > 1 ? ' put' : ' puts');
    }

    /** @return list<Finding> */
    private function notReleasable(JobFacts $job): array
    {
        if ($job->releasedBy === [] || $job->releasable) {
            return [];
        }

        return [new Finding(Finding::NOT_RELEASABLE, $job->class, sprintf(
            '%s the job back on the queue, but the job has no release(): use '
            . 'Illuminate\\Queue\\InteractsWithQueue in it (without, each refusal fails the run, and the '
            . "job comes back after its backoff, not the release's seconds)",
            self::puts($job->releasedBy),
        ))];
    }

    /** @return list<Finding> */
    private function releasedWithoutTries(JobFacts $job): array
    {
        // Releases are no exceptions: $maxExceptions does not bound them, only the tries do
        // (retryUntil() and $tries 0: as many as the releases take).
        $tries = $job->tries ?? 1;   // queue:work --tries defaults to 1
        if ($job->releasedBy === [] || $job->retryUntil || $tries < 1) {
            return [];
        }
        $released = self::puts($job->releasedBy);
        if ($tries === 1) {
            return [new Finding(Finding::RELEASED_WITHOUT_TRIES, $job->class, sprintf(
                '%s the job back on the queue, and each release uses a try: with %s the job fails '
                . '(MaxAttemptsExceededException) when taken after its first release, its work never done; '
                . 'give it $tries room for its releases, or retryUntil()',
                $released,
                $job->tries === null ? "1 try (the worker's --tries, 1 by default)" : '$tries 1',
            ))];
        }
        $releases = $tries - 1;
        if ($releases * $this->longestRelease >= self::RELEASES_FOR) {
            return [];
        }

        return [new Finding(Finding::RELEASED_WITHOUT_TRIES, $job->class, sprintf(
            '%s the job back on the queue, and each release uses a try: with $tries %d the job '
            . 'outlasts a full funnel for at most %d s (%d release%s of at most %d s, resilient.queue.release_delay), '
            . 'then fails (MaxAttemptsExceededException); give it retryUntil(), or $tries for %d s of releases',
            $released,
            $tries,
            $releases * $this->longestRelease,
            $releases,
            $releases === 1 ? '' : 's',
            $this->longestRelease,
            self::RELEASES_FOR,
        ))];
    }

    /** @return list<Finding> */
    private function funnels(JobFacts $job): array
    {
        $found = [];
        foreach ($this->funnelOptions === null ? [] : $job->funnels as $name) {
            try {
                ($this->funnelOptions)($name);
            } catch (\InvalidArgumentException $e) {
                $found[] = new Finding(Finding::JOB_FUNNEL, $job->class, sprintf(
                    "new Funnel('%s') fails at every run: %s",
                    $name, preg_replace('/^resilient: /', '', $e->getMessage()),
                ));
            }
        }

        return $found;
    }

    /**
     * A client the job calls that no call can use: not defined, or an entry every call refuses.
     * Whatever the job's timeout (one of 0 skips the nesting rule, not this).
     *
     * @return list<Finding>
     */
    private function unknownClients(JobFacts $job): array
    {
        $found = [];
        foreach ($this->clientsOf($job) as $name) {
            if (($why = $this->unknown($name)) !== null) {
                $found[] = new Finding(Finding::UNKNOWN_CLIENT, $job->class, "calls client '$name', $why");
            }
        }

        return $found;
    }

    /** Why no call can use client $name, or null when its config builds one. */
    private function unknown(string $name): ?string
    {
        if (in_array($name, $this->broken, true)) {
            return 'whose entry in config/resilient.php cannot be built (the error above): every call throws';
        }
        if (! isset($this->clients[$name]) || ! is_array($this->clients[$name])) {
            return 'which config/resilient.php does not define';
        }

        return null;
    }

    /** @return list<Finding> */
    private function nesting(JobFacts $job): array
    {
        $found = [];
        $timeout = (float) ($job->timeout ?? $this->workerTimeout);
        $timeoutText = $job->timeout !== null ? sprintf('$timeout %gs', $timeout) : sprintf('no $timeout (the worker\'s %gs)', $timeout);
        $connections = $this->connectionsOf($job);
        if ($timeout <= 0) {
            // 0 is no timeout (pcntl_alarm(0)): nothing bounds HTTP time but the clients' own
            // deadlines, and nothing stops a run before retry_after.
            foreach ($connections as $connection => [$retryAfter, $why]) {
                $found[] = new Finding(Finding::NESTING, $job->class, sprintf(
                    '%s 0 (none: the worker never stops the job) and retry_after %gs of queue connection "%s"%s: '
                    . 'a run longer than retry_after is taken again by another worker while it still runs; '
                    . 'give the job a $timeout several seconds below retry_after',
                    $job->timeout !== null ? '$timeout' : 'no $timeout and the worker\'s',
                    $retryAfter, $connection, $why,
                ));
            }

            return $found;
        }

        $limits = [];
        foreach ($this->clientsOf($job) as $name) {
            if ($this->unknown($name) === null) {
                $limits[] = ClientLimits::of($name, $this->clients[$name]);
            }
        }
        // A WithinDeadline whose seconds are known only at run time (INF): listed as not checked.
        if ($limits !== [] && $job->withinDeadline !== INF) {
            $http = array_sum(array_map(fn (ClientLimits $l) => $l->worstCase, $limits));
            $bound = $job->withinDeadline === null
                ? $timeout - ($this->deadlineMargin ?? max(1.0, $timeout / 10))
                : (is_float($job->withinDeadline) ? $job->withinDeadline : INF);
            if (min($http, $bound) >= $timeout) {
                // The route middleware knows no $timeout: say so rather than "add WithinDeadline".
                $route = $job->routeDeadline && $bound <= $http;
                $found[] = new Finding(Finding::NESTING, $job->class, sprintf(
                    'HTTP may take %gs (%s) >= %s: the worker kills the job before the client gives up; %s',
                    min($http, $bound),
                    $route
                        ? sprintf('the route middleware %s: %gs%s', JobFacts::ROUTE_DEADLINE, $bound, $job->routeDeadlineDefault ? ', its default' : '')
                        : implode(' + ', array_map(fn (ClientLimits $l) => $l->describe(), $limits)),
                    $timeoutText,
                    $route
                        ? 'use ' . JobFacts::QUEUE_DEADLINE . ' (without seconds: $timeout − margin) in a job\'s middleware()'
                        : 'lower the deadline or add new WithinDeadline() to middleware()',
                ));
            }
        }

        foreach ($connections as $connection => [$retryAfter, $why]) {
            if ($timeout >= $retryAfter) {
                $found[] = new Finding(Finding::NESTING, $job->class, sprintf(
                    '%s >= retry_after %gs of queue connection "%s"%s: another worker takes the job again while it still runs; '
                    . 'keep $timeout several seconds below retry_after',
                    $timeoutText, $retryAfter, $connection, $why,
                ));
            }
        }

        return $found;
    }

    /**
     * The connections whose `retry_after` a job's `$timeout` must stay below: its own, else the
     * default; when that is one without (`sync` in tests and CI), every connection with one,
     * since the job runs on a real queue elsewhere.
     *
     * @return array<string, array{0: float, 1: string}> name => [retry_after, why it is checked]
     */
    private function connectionsOf(JobFacts $job): array
    {
        $default = (string) ($this->queue['default'] ?? 'sync');
        $connection = $job->connection ?? $default;
        if (! $job->connectionAtRunTime && ($retryAfter = $this->retryAfter($connection)) !== null) {
            return [$connection => [$retryAfter, '']];
        }
        if ($job->connection !== null) {
            return [];
        }
        $why = $job->connectionAtRunTime
            ? ' (the job picks its connection at run time (onConnection()), so every queue connection with a retry_after is checked)'
            : sprintf(' (the default connection is "%s" here, so every queue connection with a retry_after is checked)', $default);
        $all = [];
        foreach (array_keys((array) ($this->queue['connections'] ?? [])) as $name) {
            if (($retryAfter = $this->retryAfter((string) $name)) !== null) {
                $all[(string) $name] = [$retryAfter, $why];
            }
        }

        return $all;
    }

    /** The connection's `retry_after` (Laravel's 60 s for the drivers that have one), or null. */
    private function retryAfter(string $connection): ?float
    {
        $conn = $this->queue['connections'][$connection] ?? null;
        if (! is_array($conn)) {
            return null;
        }
        $retryAfter = $conn['retry_after'] ?? (in_array($conn['driver'] ?? '', self::RETRY_AFTER_DRIVERS, true) ? 60 : null);

        return $retryAfter === null ? null : (float) $retryAfter;
    }

    /**
     * The clients a job calls: the names it surely gives a client, and those given to another
     * `client()` method that config defines.
     *
     * @return list<string>
     */
    private function clientsOf(JobFacts $job): array
    {
        $maybe = array_filter($job->maybeClients, fn (string $name) => is_array($this->clients[$name] ?? null));

        return array_values(array_unique([...$job->clients, ...$maybe]));
    }

    /** @return list<Finding> */
    private function twoLayers(JobFacts $job): array
    {
        [$runs, $runsText] = $this->runs($job);
        if ($runs <= 1) {
            return [];
        }
        $found = [];
        foreach ($this->clientsOf($job) as $name) {
            if (! isset($this->clients[$name]) || ! is_array($this->clients[$name])) {
                continue;
            }
            $attempts = ClientLimits::of($name, $this->clients[$name])->maxAttempts;
            if ($attempts > 1) {
                $found[] = new Finding(Finding::TWO_LAYERS, $job->class, sprintf(
                    'client %s makes up to %d attempts per run × %s = %s upstream calls per dispatch; '
                    . "let one layer own the retries ('max_attempts' => 1 for this client%s)",
                    $name, $attempts, $runsText, is_finite($runs) ? (string) ($attempts * $runs) : 'unbounded',
                    match (true) {
                        // A try is spent at each release: one try would fail the job at its first.
                        $job->releasedBy !== [] => ": the job's releases are its retries",
                        $job->retryUntil => ', or $tries = 1 without retryUntil()',
                        default => ', or $tries = 1',
                    },
                ));
            }
        }

        return $found;
    }

    /** @return list<Finding> */
    private function jitter(JobFacts $job): array
    {
        $lists = array_filter($job->backoff, fn ($delay) => ! is_scalar($delay) && $delay !== null);
        if ($lists !== []) {
            $shown = json_encode(array_values($job->backoff));

            return [new Finding(Finding::FIXED_BACKOFF, $job->class,
                "backoff $shown is not seconds: Laravel writes \$backoff into the job's payload as text, and a list in it fails "
                . 'every dispatch ("Array to string conversion"); for ranges use Resilient\\Laravel\\Queue\\JitteredBackoff with '
                . "\$backoffRanges = $shown")];
        }
        [$runs] = $this->runs($job);
        if ($runs <= 1 || $job->backoffKind === 'jittered') {
            return [];
        }
        $what = $job->backoffKind === 'none'
            ? 'no backoff: a failed run is retried at once'
            : 'fixed backoff [' . implode(', ', $job->backoff) . ']: every job that failed together comes back at the same second';

        return [new Finding(Finding::FIXED_BACKOFF, $job->class,
            "$what; use Resilient\\Laravel\\Queue\\JitteredBackoff (ranges, e.g. [[240, 360], [540, 660]])")];
    }

    /** @return array{0: float, 1: string} how many times the job may run (INF when unbounded) */
    private function runs(JobFacts $job): array
    {
        if ($job->retryUntil) {
            // Laravel's worker ignores $tries when retryUntil() is set: it retries until then.
            $runs = INF;
            $text = 'tries until retryUntil()' . ($job->tries !== null && $job->tries !== 0
                ? sprintf(' ($tries %d is ignored when retryUntil() is set)', $job->tries) : '');
        } elseif ($job->tries === 0) {
            $runs = INF;
            $text = 'unlimited tries ($tries = 0)';
        } else {
            $runs = (float) ($job->tries ?? 1);   // queue:work --tries defaults to 1
            $text = sprintf('%d tries', $runs);
        }
        if ($job->maxExceptions !== null && $job->maxExceptions < $runs) {
            $runs = (float) $job->maxExceptions;
            $text = sprintf('%d failing runs ($maxExceptions)', $runs);
        }

        return [$runs, $text];
    }
}
