<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Resilient\Laravel\Console\CheckCommand;
use Resilient\Tests\Harness\Run;
use Symfony\Component\Console\Input\ArrayInput;
use Symfony\Component\Console\Output\BufferedOutput;

/**
 * `resilient:check` on job sources written the ways real apps write them: named arguments, a
 * class constant for the client's name, a call split over lines, the route middleware class in
 * a job, `retryUntil()` beside `$tries`, a `check.paths` entry that is not there, a `funnels`
 * entry no Funnel can be built from. In process, each job class in a file of its own.
 */
final class CheckEdgeCasesTest extends PackageTestCase
{
    private const CLIENTS = [
        // No deadline, one attempt of up to 30 s: only a WithinDeadline bounds it.
        'slow' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 30.0, 'max_attempts' => 1],
        'erp' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 30.0, 'max_attempts' => 1, 'deadline' => 90.0],
        'pricing' => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 1.0, 'deadline' => 3.0, 'max_attempts' => 3],
    ];

    private const HEAD = "use Illuminate\\Contracts\\Queue\\ShouldQueue;\nuse Resilient\\Laravel\\Facades\\Resilient;\n"
        . "use Resilient\\Laravel\\Queue\\JitteredBackoff;\nuse Illuminate\\Support\\Facades\\Http;\n";

    public function testANamedSecondsArgumentOfWithinDeadlineIsRead(): void
    {
        [$exit, $json] = $this->check([
            'NamedSeconds' => self::HEAD . "use Resilient\\Laravel\\Queue\\WithinDeadline;\n"
                . "final class NamedSeconds implements ShouldQueue\n{\n    public \$timeout = 20;\n    public \$tries = 1;\n"
                . "    public function middleware(): array { return [new WithinDeadline(seconds: 15)]; }\n"
                . "    public function handle(): void { Resilient::client('slow')->get('/x'); }\n}\n",
        ]);
        $this->assertSame([], $json['findings'], '15 s under a 20 s timeout is right');
        $this->assertSame(0, $exit);
    }

    /** The job and the client php/README.md's five minutes set up pass the check it tells to run. */
    public function testTheReadmesJobPassesTheCheck(): void
    {
        $readme = (string) file_get_contents(__DIR__ . '/../../php/README.md');
        $this->assertSame(1, preg_match("/```php\n   \/\/ config\/resilient.php\n   ('erp' => .*?),\n   ```/", $readme, $config));
        $this->assertSame(1, preg_match("/```php\n(   use .*?class SyncStock .*?)   ```/s", $readme, $job));
        $clients = eval("return [{$config[1]}];");
        $clients['erp']['base_url'] = 'http://127.0.0.1:9';
        [$exit, $json] = $this->check(
            ['SyncStock' => preg_replace('/^   /m', '', $job[1])],
            ['clients' => $clients],
        );
        $this->assertSame([], $json['findings']);
        $this->assertSame(0, $exit);
    }

    /**
     * A job our middleware releases must be able to go back on the queue: without
     * InteractsWithQueue (or a release() of its own) the release throws at its first refusal,
     * and the job waits for the queue's retry_after or its backoff instead of the release's seconds.
     */
    public function testAJobOurMiddlewareReleasesMustBeReleasable(): void
    {
        $job = fn (string $class, string $uses) => self::HEAD
            . "use Illuminate\\Queue\\InteractsWithQueue;\n"
            . "use Resilient\\Laravel\\Queue\\{ReleaseWhenUnavailable, WithinDeadline};\n"
            . "final class $class implements ShouldQueue\n{\n    use $uses;\n    public \$timeout = 20;\n    public \$tries = 11;\n"
            . "    public function middleware(): array { return [new ReleaseWhenUnavailable(), new WithinDeadline()]; }\n"
            . "    public function handle(): void { Resilient::client('slow')->get('/x'); }\n}\n";
        [$exit, $json] = $this->check([
            'Unreleasable' => $job('Unreleasable', 'JitteredBackoff'),
            'Releasable' => $job('Releasable', 'InteractsWithQueue, JitteredBackoff'),
        ]);
        $this->assertSame(1, $exit);
        $this->assertSame([[
            'rule' => 'cannot be released',
            'job' => $json['findings'][0]['job'] ?? null,
            'message' => 'ReleaseWhenUnavailable puts the job back on the queue, but the job has no release(): '
                . 'use Illuminate\\Queue\\InteractsWithQueue in it (without, each refusal fails the run, and the job '
                . 'comes back after its backoff, not the release\'s seconds)',
        ]], $json['findings']);
        $this->assertSame('Unreleasable', $this->short($json['findings'][0]['job']));
    }

    /**
     * With the default connection `sync` (tests, CI: QUEUE_CONNECTION=sync), a job without a
     * `$connection` of its own runs on a real queue elsewhere: its `$timeout` is checked against
     * every connection with a `retry_after`, instead of passing unchecked.
     */
    public function testUnderASyncDefaultEveryQueuesRetryAfterIsChecked(): void
    {
        $job = fn (string $class, int $timeout, string $more = '') => self::HEAD
            . "final class $class implements ShouldQueue\n{\n    use JitteredBackoff;\n    public \$timeout = $timeout;\n    public \$tries = 1;\n$more"
            . "    public function handle(): void { }\n}\n";
        $queue = ['default' => 'sync', 'connections' => [
            'sync' => ['driver' => 'sync'],
            'redis' => ['driver' => 'redis', 'retry_after' => 90],
            'sqs' => ['driver' => 'sqs'],
        ]];
        [$exit, $json] = $this->check([
            'LongJob' => $job('LongJob', 120),
            'ShortJob' => $job('ShortJob', 60),
            'PinnedJob' => $job('PinnedJob', 120, "    public \$connection = 'sync';\n"),
        ], [], ['queue' => $queue]);
        $this->assertSame(1, $exit);
        $this->assertSame(
            ['LongJob: nesting: $timeout 120s >= retry_after 90s of queue connection "redis" (the default connection is "sync" here, so every queue connection with a retry_after is checked)'],
            array_map(fn ($f) => $this->short($f['job']) . ': ' . $f['rule'] . ': ' . strstr($f['message'], ':', true), $json['findings']),
        );
    }

    /**
     * A job using `Queueable` cannot redeclare `$connection` with a value (PHP refuses the
     * property), so it picks its connection in code: `$this->onConnection('x')`. A literal one
     * is the job's connection; one known only at run time has every connection with a
     * `retry_after` checked. Before, both were checked against the default connection only (a
     * false "ok" for a `$timeout` over the chosen queue's `retry_after`).
     */
    public function testAConnectionChosenWithOnConnectionIsTheOneChecked(): void
    {
        $job = fn (string $class, string $constructor) => self::HEAD . "use Illuminate\\Bus\\Queueable;\n"
            . "final class $class implements ShouldQueue\n{\n    use Queueable, JitteredBackoff;\n    public \$timeout = 60;\n    public \$tries = 1;\n"
            . "    public function __construct(string \$queue = 'redis') { $constructor }\n"
            . "    public function handle(): void { }\n}\n";
        $queue = ['default' => 'redis', 'connections' => [
            'redis' => ['driver' => 'redis', 'retry_after' => 90],
            'redis-short' => ['driver' => 'redis', 'retry_after' => 30],
            'database' => ['driver' => 'database', 'retry_after' => 45],
        ]];
        [$exit, $json] = $this->check([
            'ShortConn' => $job('ShortConn', "\$this->onConnection('redis-short');"),
            'LongConn' => $job('LongConn', "\$this->onConnection('redis');"),
            'RunTimeConn' => $job('RunTimeConn', "\$this->onConnection(\$queue);"),
            // Another job's connection, dispatched from this one's code: not this job's.
            'DispatchesElsewhere' => $job('DispatchesElsewhere', "ShortConn::dispatch()->onConnection('redis-short'); (new LongConn())->onConnection(\$queue);"),
        ], [], ['queue' => $queue]);
        $this->assertSame(1, $exit);
        $this->assertSame([
            'RunTimeConn: nesting: $timeout 60s >= retry_after 30s of queue connection "redis-short" (the job picks its connection at run time (onConnection()), so every queue connection with a retry_after is checked)',
            'RunTimeConn: nesting: $timeout 60s >= retry_after 45s of queue connection "database" (the job picks its connection at run time (onConnection()), so every queue connection with a retry_after is checked)',
            'ShortConn: nesting: $timeout 60s >= retry_after 30s of queue connection "redis-short"',
        ], array_values(array_map(
            fn ($f) => $this->short($f['job']) . ': ' . $f['rule'] . ': ' . strstr($f['message'], ': another worker', true),
            $json['findings'],
        )));
    }

    /** Laravel 8's worker ignores `$tries` when `retryUntil()` is set: the job runs until then. */
    public function testRetryUntilMakesTheRunsUnboundedWhateverTheTries(): void
    {
        [$exit, $json] = $this->check([
            'UntilAnHour' => self::HEAD
                . "final class UntilAnHour implements ShouldQueue\n{\n    public \$timeout = 30;\n    public \$tries = 1;\n"
                . "    public function retryUntil() { return now()->addHour(); }\n"
                . "    public function handle(): void { Resilient::client('pricing')->get('/price'); }\n}\n",
        ]);
        $this->assertSame(1, $exit);
        $this->assertSame([
            'retries in two layers: client pricing makes up to 3 attempts per run × tries until retryUntil() ($tries 1 is ignored when retryUntil() is set) = unbounded upstream calls per dispatch',
            'fixed backoff: no backoff: a failed run is retried at once',
        ], array_map(fn ($f) => $f['rule'] . ': ' . strstr($f['message'], ';', true), $json['findings']));
    }

    /**
     * A job our middleware puts back on the queue (ReleaseWhenUnavailable, Queue\\Funnel) uses a
     * try at each release (Laravel's rule): with one try it fails (MaxAttemptsExceededException)
     * when taken again after its first release, its work never done. The check says so, and
     * for such a job its "retries in two layers" advice no longer offers `$tries = 1`.
     */
    public function testAJobOurMiddlewareReleasesNeedsTriesForItsReleases(): void
    {
        $job = fn (string $class, string $tries, string $middleware, string $client) => self::HEAD
            . "use Resilient\\Laravel\\Queue\\{Funnel, ReleaseWhenUnavailable, WithinDeadline};\n"
            . "final class $class implements ShouldQueue\n{\n    use \\Illuminate\\Queue\\InteractsWithQueue, JitteredBackoff;\n    public \$timeout = 20;\n$tries"
            . "    public function middleware(): array { return [$middleware, new WithinDeadline()]; }\n"
            . "    public function handle(): void { Resilient::client('$client')->get('/x'); }\n}\n";
        [$exit, $json] = $this->check([
            'OneTryReleased' => $job('OneTryReleased', "    public \$tries = 1;\n", 'new ReleaseWhenUnavailable()', 'slow'),
            'NoTriesFunnel' => $job('NoTriesFunnel', '', "new Funnel('slow', limit: 2)", 'slow'),
            'ReleasedUntil' => $job('ReleasedUntil', "    public \$tries = 1;\n    public function retryUntil() { return now()->addHour(); }\n", 'new ReleaseWhenUnavailable()', 'slow'),
            'ReleasedPricing' => $job('ReleasedPricing', "    public \$tries = 3;\n", 'new ReleaseWhenUnavailable()', 'pricing'),
            // Two releases of at most 30 s: a funnel full for a minute fails it.
            'ReleasedThreeTries' => $job('ReleasedThreeTries', "    public \$tries = 3;\n", 'new ReleaseWhenUnavailable()', 'slow'),
            'ReleasedElevenTries' => $job('ReleasedElevenTries', "    public \$tries = 11;\n", 'new ReleaseWhenUnavailable()', 'slow'),
            // Laravel's pattern for a job that releases itself: tries for the releases, one
            // exception. Releases are no exceptions: room enough.
            'ReleasesOneException' => $job('ReleasesOneException', "    public \$tries = 25;\n    public \$maxExceptions = 1;\n", 'new ReleaseWhenUnavailable()', 'slow'),
            'BothRelease' => $job('BothRelease', "    public \$tries = 1;\n", "new ReleaseWhenUnavailable(), new Funnel('slow', limit: 2)", 'slow'),
        ]);
        $this->assertSame(1, $exit);
        $found = [];
        foreach ($json['findings'] as $f) {
            $found[$this->short($f['job'])][] = $f['rule'] . ': ' . $f['message'];
        }
        ksort($found);
        $this->assertSame(['BothRelease', 'NoTriesFunnel', 'OneTryReleased', 'ReleasedPricing', 'ReleasedThreeTries'], array_keys($found), json_encode($found));
        $this->assertStringStartsWith('released without tries: ReleaseWhenUnavailable and Queue\\Funnel put the job back on the queue', $found['BothRelease'][0]);
        $this->assertSame(
            ['released without tries: ReleaseWhenUnavailable puts the job back on the queue, and each release uses a try: with $tries 3 the job '
            . 'outlasts a full funnel for at most 60 s (2 releases of at most 30 s, resilient.queue.release_delay), then fails '
            . '(MaxAttemptsExceededException); give it retryUntil(), or $tries for 300 s of releases'],
            $found['ReleasedThreeTries'],
        );
        $this->assertSame(
            'released without tries: Queue\\Funnel puts the job back on the queue, and each release uses a try: with 1 try (the worker\'s --tries, 1 by default) '
            . 'the job fails (MaxAttemptsExceededException) when taken after its first release, its work never done; give it $tries room for its releases, or retryUntil()',
            $found['NoTriesFunnel'][0],
        );
        $this->assertStringStartsWith('released without tries: ReleaseWhenUnavailable puts the job back on the queue, and each release uses a try: with $tries 1 the job fails', $found['OneTryReleased'][0]);
        $this->assertStringEndsWith("let one layer own the retries ('max_attempts' => 1 for this client: the job's releases are its retries)", $found['ReleasedPricing'][0]);
    }

    /**
     * The route middleware class in a job's middleware() is 30 s whatever the job's timeout
     * (it knows no $timeout); the queue one, even imported in a group, is $timeout − margin.
     */
    public function testTheRouteMiddlewareInAJobIsJudgedByItsOwnThirtySeconds(): void
    {
        [$exit, $json] = $this->check([
            'RouteClass' => self::HEAD . "use Resilient\\Laravel\\Middleware\\WithinDeadline;\n"
                . "final class RouteClass implements ShouldQueue\n{\n    public \$timeout = 20;\n    public \$tries = 1;\n"
                . "    public function middleware(): array { return [new WithinDeadline()]; }\n"
                . "    public function handle(): void { Resilient::client('slow')->get('/x'); }\n}\n",
            'GroupImport' => "use Illuminate\\Contracts\\Queue\\ShouldQueue;\nuse Resilient\\Laravel\\Facades\\Resilient;\n"
                . "use Resilient\\Laravel\\Queue\\{ReleaseWhenUnavailable, WithinDeadline};\n"
                . "final class GroupImport implements ShouldQueue\n{\n    use \\Illuminate\\Queue\\InteractsWithQueue, \\Resilient\\Laravel\\Queue\\JitteredBackoff;\n"
                . "    public \$timeout = 20;\n    public \$tries = 11;\n"
                . "    public function middleware(): array { return [new ReleaseWhenUnavailable(), new WithinDeadline()]; }\n"
                . "    public function handle(): void { Resilient::client('slow')->get('/x'); }\n}\n",
        ]);
        $this->assertSame(1, $exit);
        $this->assertSame(['RouteClass'], array_map(fn ($f) => $this->short($f['job']), $json['findings']), json_encode($json));
        $this->assertStringStartsWith('HTTP may take 30s (the route middleware Resilient\\Laravel\\Middleware\\WithinDeadline: 30s, its default) >= $timeout 20s', $json['findings'][0]['message']);
        $this->assertStringContainsString('use Resilient\\Laravel\\Queue\\WithinDeadline', $json['findings'][0]['message']);
    }

    /**
     * A client named by a constant of the class, or by a named argument over several lines, is
     * checked; a name only known at run time is listed as not checked instead of passing.
     */
    public function testClientNamesFromConstantsAndNamedArgumentsAreChecked(): void
    {
        [$exit, $json] = $this->check([
            'ConstName' => self::HEAD
                . "final class ConstName implements ShouldQueue\n{\n    private const UPSTREAM = 'erp';\n    public \$timeout = 60;\n    public \$tries = 1;\n"
                . "    public function handle(): void { Resilient::client(self::UPSTREAM)->get('/orders'); }\n}\n",
            'NamedOverLines' => self::HEAD
                . "final class NamedOverLines implements ShouldQueue\n{\n    public \$timeout = 60;\n    public \$tries = 1;\n"
                . "    public function handle(): void\n    {\n        Http::withToken('x')\n            ->resilient(name: 'erp')\n            ->get('/orders');\n    }\n}\n",
            'AtRunTime' => self::HEAD
                . "final class AtRunTime implements ShouldQueue\n{\n    public \$timeout = 60;\n    public \$tries = 1;\n    public string \$upstream = 'erp';\n"
                . "    public function handle(): void { Resilient::client(\$this->upstream)->get('/orders'); }\n}\n",
        ]);
        $this->assertSame(1, $exit);
        $found = [];
        foreach ($json['findings'] as $f) {
            $found[$this->short($f['job'])] = $f['rule'] . ': ' . $f['message'];
        }
        ksort($found);
        $this->assertSame(['ConstName', 'NamedOverLines'], array_keys($found), json_encode($json));
        foreach ($found as $message) {
            $this->assertStringStartsWith('nesting: HTTP may take 90s (erp: deadline 90s) >= $timeout 60s', $message);
        }
        $this->assertSame([['job' => 'AtRunTime', 'what' => 'client name $this->upstream (Resilient::client()): known only at run time']],
            array_map(fn ($u) => ['job' => $this->short($u['job'])] + $u, $json['unchecked']));
    }

    /**
     * `->client('x')` on anything but the facade may be another library's (an SDK's
     * `->client('eu-west')`): it counts only when config/resilient.php defines `x`, while
     * `Resilient::client()` with a name config lacks is still a finding. An abstract job class
     * never runs: the concrete class that extends it is the one checked.
     */
    public function testOnlyTheFacadesClientCallMustNameAConfiguredClientAndAbstractJobsAreSkipped(): void
    {
        [$exit, $json] = $this->check([
            'OtherSdk' => self::HEAD
                . "final class OtherSdk implements ShouldQueue
{
    use JitteredBackoff;
    public \$timeout = 60;
    public \$tries = 1;
    public \$sdk;
"
                . "    public function handle(): void { \$this->sdk->client('eu-west')->send(); }
}
",
            'Injected' => self::HEAD
                . "final class Injected implements ShouldQueue
{
    public \$timeout = 60;
    public \$tries = 1;
"
                . "    public function handle(): void { app(\\Resilient\\Laravel\\ResilientManager::class)->client('erp')->get('/x'); }
}
",
            'FacadeTypo' => self::HEAD
                . "final class FacadeTypo implements ShouldQueue
{
    public \$timeout = 60;
    public \$tries = 1;
"
                . "    public function handle(): void { \\Resilient\\Laravel\\Facades\\Resilient::client('erpp')->get('/x'); }
}
",
            'BaseJob' => self::HEAD
                . "abstract class BaseJob implements ShouldQueue
{
    public \$timeout = 30;
    public \$tries = 3;
}
",
            'RealJob' => self::HEAD
                . "final class RealJob extends BaseJob
{
    use JitteredBackoff;
    public function handle(): void {}
}
",
        ]);
        $this->assertSame(1, $exit);
        $found = array_map(fn ($f) => $this->short($f['job']) . ' ' . $f['rule'], $json['findings']);
        sort($found);
        $this->assertSame(['FacadeTypo unknown client', 'Injected nesting'], $found, json_encode($json));
    }

    /**
     * With the default paths (null: app/Jobs) an app without app/Jobs (Laravel's skeleton has
     * none; an app that only uses `Http::resilient()`) has no job to check: not an error over a
     * setting it never made.
     */
    public function testTheDefaultPathMissingIsNoJobsNotAnError(): void
    {
        $this->boot(['clients' => self::CLIENTS]);
        $this->assertDirectoryDoesNotExist($this->app->path('Jobs'));
        [$exit, $out] = $this->artisan(['--json' => true]);
        $this->assertSame(0, $exit, $out);
        $json = json_decode($out, true);
        $this->assertSame([[], [], true], [$json['errors'] ?? [], $json['jobs'], $json['ok']], $out);
    }

    /**
     * A `$backoff` property wins over JitteredBackoff's `backoff()`, as Laravel reads them
     * (`$job->backoff ?? $job->backoff()`): the fixed delay the check exists to catch.
     */
    public function testABackoffPropertyOverTheJitteredTraitIsFixed(): void
    {
        [$exit, $json] = $this->check([
            'BothBackoff' => self::HEAD
                . "final class BothBackoff implements ShouldQueue\n{\n    use JitteredBackoff;\n    public \$timeout = 60;\n    public \$tries = 3;\n    public \$backoff = 10;\n"
                . "    public function handle(): void { Resilient::client('slow')->get('/x'); }\n}\n",
        ]);
        $this->assertSame(1, $exit);
        $this->assertSame(['fixed backoff'], array_column($json['findings'], 'rule'), json_encode($json));
    }

    /**
     * A `$backoff` of ranges (JitteredBackoff's `$backoffRanges` written as `$backoff`): Laravel
     * implodes it into the payload, which fails the dispatch ("Array to string conversion").
     * The check says so for that job: before, it crashed on the same implode, and checked no
     * other job.
     */
    public function testABackoffOfRangesIsAFindingNotACrash(): void
    {
        [$exit, $json] = $this->check([
            'RangedBackoff' => self::HEAD
                . "final class RangedBackoff implements ShouldQueue\n{\n    public \$timeout = 60;\n    public \$tries = 3;\n    public \$backoff = [[60, 90], [300, 400]];\n"
                . "    public function handle(): void { }\n}\n",
            'OneTry' => self::HEAD
                . "final class OneTry implements ShouldQueue\n{\n    public \$timeout = 60;\n    public \$tries = 1;\n    public \$backoff = [[60, 90]];\n"
                . "    public function handle(): void { }\n}\n",
        ]);
        $this->assertSame(1, $exit, json_encode($json));
        $this->assertSame([
            ['fixed backoff', 'OneTry', 'backoff [[60,90]] is not seconds: Laravel writes $backoff into the job\'s payload as text, and a list in it fails every dispatch ("Array to string conversion"); for ranges use Resilient\\Laravel\\Queue\\JitteredBackoff with $backoffRanges = [[60,90]]'],
            ['fixed backoff', 'RangedBackoff', 'backoff [[60,90],[300,400]] is not seconds: Laravel writes $backoff into the job\'s payload as text, and a list in it fails every dispatch ("Array to string conversion"); for ranges use Resilient\\Laravel\\Queue\\JitteredBackoff with $backoffRanges = [[60,90],[300,400]]'],
        ], array_map(fn ($f) => [$f['rule'], $this->short($f['job']), $f['message']], $json['findings']));
    }

    /**
     * The layout the config recommends, one class per upstream making its calls, handed to the
     * job: its client's attempts times the job's tries are retries in two layers as if the job
     * called the client itself (before, the job passed as "ok": only its own source was read).
     * A class of the framework's (not of the job's root namespace) is not followed.
     */
    public function testACallMadeByAServiceTheJobIsHandedCountsAsTheJobs(): void
    {
        $gateway = "final class ShippingGateway\n{\n    public function quote(): mixed { return Http::resilient('pricing')->get('/quote'); }\n}\n";
        $job = fn (string $class, string $handle) => self::HEAD
            . "final class $class implements ShouldQueue\n{\n    use JitteredBackoff;\n    public \$timeout = 60;\n    public \$tries = 5;\n"
            . "    public function __construct(private ?\\Illuminate\\Contracts\\Cache\\Repository \$cache = null) { }\n"
            . "    public function handle($handle): void { }\n}\n";
        [$exit, $json] = $this->check([
            'ShippingGateway' => $gateway,
            'QuoteViaGateway' => $job('QuoteViaGateway', 'ShippingGateway $gateway'),
            'QuoteViaUnion' => $job('QuoteViaUnion', 'ShippingGateway|\\Illuminate\\Contracts\\Bus\\Dispatcher $gateway'),
            'NoGateway' => $job('NoGateway', '\\Illuminate\\Contracts\\Bus\\Dispatcher $bus'),
        ]);
        $this->assertSame(1, $exit, json_encode($json));
        $found = [];
        foreach ($json['findings'] as $f) {
            $found[$this->short($f['job'])][] = $f['rule'] . ': ' . $f['message'];
        }
        ksort($found);
        $this->assertSame(['QuoteViaGateway', 'QuoteViaUnion'], array_keys($found), json_encode($found));
        $this->assertStringStartsWith('retries in two layers: client pricing makes up to 3 attempts per run × 5 tries = 15', $found['QuoteViaGateway'][0]);
    }

    /** A `check.paths` entry that is not a directory is an error, not "no jobs": CI must not pass. */
    public function testAMissingPathIsAnError(): void
    {
        $missing = Run::dir() . '/no-such-jobs';
        $this->boot(['clients' => self::CLIENTS, 'check' => ['paths' => [$missing]]]);
        [$exit, $out] = $this->artisan(['--json' => true]);
        $this->assertSame(2, $exit, $out);
        $json = json_decode($out, true);
        $this->assertFalse($json['ok']);
        $this->assertSame(["resilient.check.paths: $missing is not a directory"], $json['errors']);

        [$exit, $out] = $this->artisan([]);
        $this->assertSame(2, $exit, $out);
        $this->assertStringContainsString("resilient.check.paths: $missing is not a directory", $out);
        $this->assertStringNotContainsString('No queued job classes', $out);
    }

    /**
     * A job's `middleware()` and `handle()` inherited from a class of the app above it (an
     * abstract BaseJob, the common layout) are checked as if the job declared them: before,
     * only the job's own file was read, and a child of a base whose middleware releases the
     * job, or whose handle() calls a retrying client, passed with nothing found.
     */
    public function testWhatAJobInheritsFromTheAppsBaseClassIsChecked(): void
    {
        $body = "    use \\Illuminate\\Queue\\InteractsWithQueue, JitteredBackoff;\n    public \$timeout = 20;\n    public \$tries = 3;\n"
            . "    public function middleware(): array { return [new ReleaseWhenUnavailable()]; }\n"
            . "    public function handle(): void { Resilient::client('pricing')->get('/x'); }\n";
        $head = self::HEAD . "use Resilient\\Laravel\\Queue\\ReleaseWhenUnavailable;\n";
        [$exit, $json] = $this->check([
            'FlatJob' => $head . "final class FlatJob implements ShouldQueue\n{\n$body}\n",
            'BaseJob' => $head . "abstract class BaseJob implements ShouldQueue\n{\n$body}\n",
            'ChildJob' => self::HEAD . "final class ChildJob extends BaseJob\n{\n}\n",
        ]);
        $this->assertSame(1, $exit);
        $found = [];
        foreach ($json['findings'] as $f) {
            $found[$this->short($f['job'])][] = $f['rule'] . ': ' . $f['message'];
        }
        $this->assertSame(['ChildJob', 'FlatJob'], array_keys($found), json_encode($found));
        $this->assertNotEmpty($found['FlatJob']);
        $this->assertSame($found['FlatJob'], $found['ChildJob']);
        $this->assertStringContainsString('released without tries', implode("\n", $found['ChildJob']));
    }

    /**
     * A relative `check.paths` entry is the app's (`app/Jobs`), wherever the command runs from:
     * before, it was looked up from the current directory, and a CI step or cron job that did
     * not `cd` into the app failed with "app/Jobs is not a directory".
     */
    public function testARelativePathIsTheApps(): void
    {
        $relative = 'check-rel-' . bin2hex(random_bytes(4));
        $app = $this->boot(['clients' => self::CLIENTS, 'check' => ['paths' => [$relative]]]);
        $this->assertDirectoryDoesNotExist(getcwd() . "/$relative");
        [, $out] = $this->artisan(['--json' => true]);
        $this->assertSame(['resilient.check.paths: ' . $app->basePath($relative) . ' is not a directory'], json_decode($out, true)['errors'], $out);

        mkdir($app->basePath($relative));
        try {
            [$exit, $out] = $this->artisan(['--json' => true]);
            $this->assertSame([], json_decode($out, true)['errors'] ?? [], $out);
            $this->assertSame(0, $exit, $out);
        } finally {
            rmdir($app->basePath($relative));
        }
    }

    /**
     * A name that is not UTF-8 (a config key read from a Latin-1 file) is written with U+FFFD,
     * as resilient:status writes it: before, json_encode() failed and `--json` printed an empty
     * line, which a CI step reading it took for no output.
     */
    public function testJsonOutputSurvivesANameThatIsNotUtf8(): void
    {
        [$exit, $json] = $this->check([], ['clients' => self::CLIENTS + ["caf\xe9" => null]]);
        $this->assertSame(2, $exit, json_encode($json, JSON_INVALID_UTF8_SUBSTITUTE));
        $this->assertFalse($json['ok']);
        $this->assertContains("resilient.clients.caf\u{FFFD}: must be an array of client options, got null", $json['errors']);
    }

    /**
     * A job class the autoloader cannot load (its parent class is gone) is an error naming it,
     * exit 2: before, the check stopped with the uncaught Error, exit 1 like a finding.
     */
    public function testAJobClassThatCannotBeLoadedIsAnError(): void
    {
        $dir = Run::tempDir('check-broken');
        $namespace = 'CheckBroken' . bin2hex(random_bytes(4));
        file_put_contents("$dir/Broken.php", "<?php\n\nnamespace $namespace;\n\nclass Broken extends MissingParent implements \\Illuminate\\Contracts\\Queue\\ShouldQueue {}\n");
        $load = function (string $class) use ($dir, $namespace) {
            if ($class === "$namespace\\Broken") {
                require "$dir/Broken.php";
            }
        };
        spl_autoload_register($load);
        try {
            $this->boot(['clients' => self::CLIENTS, 'check' => ['paths' => [$dir]]]);
            [$exit, $out] = $this->artisan(['--json' => true]);
        } finally {
            spl_autoload_unregister($load);
        }
        $this->assertSame(2, $exit, $out);
        $json = json_decode($out, true);
        $this->assertCount(1, $json['errors'], $out);
        $this->assertStringContainsString("class $namespace\\Broken cannot be loaded: Class \"$namespace\\MissingParent\" not found", $json['errors'][0]);
    }

    /** A negative `queue.deadline_margin` would put WithinDeadline() past the job's timeout: refused. */
    public function testANegativeDeadlineMarginIsAnError(): void
    {
        [$exit, $json] = $this->check([], ['queue' => ['deadline_margin' => -5]]);
        $this->assertSame(2, $exit, json_encode($json));
        $this->assertCount(1, $json['errors'], json_encode($json));
        $this->assertStringStartsWith('resilient.queue.deadline_margin: must be a finite number of seconds >= 0', $json['errors'][0]);
        $this->assertStringEndsWith('got -5', $json['errors'][0]);
    }

    /**
     * A `queue.worker_timeout` or `queue.deadline_margin` that is not a number of seconds makes
     * WithinDeadline() and Queue\Funnel throw at every run: an error, named as the middleware
     * names it (before, the check read '2m' as 60 s and '5s' as no margin, and passed).
     */
    public function testAQueueSettingThatIsNotSecondsIsAnError(): void
    {
        foreach ([
            [['worker_timeout' => '2m'], 'resilient.queue.worker_timeout', "'2m'"],
            [['worker_timeout' => -30], 'resilient.queue.worker_timeout', '-30'],
            [['deadline_margin' => '5s'], 'resilient.queue.deadline_margin', "'5s'"],
            [['deadline_margin' => [5]], 'resilient.queue.deadline_margin', 'array'],
            [['deadline_margin' => true], 'resilient.queue.deadline_margin', 'bool'],
            [['release_delay' => [5, 'soon']], 'resilient.queue.release_delay', "[5, 'soon']"],
        ] as [$queue, $key, $got]) {
            [$exit, $json] = $this->check([], ['queue' => $queue]);
            $this->assertSame(2, $exit, json_encode($json));
            $this->assertCount(1, $json['errors'], json_encode($json));
            $this->assertMatchesRegularExpression('/^' . preg_quote($key, '/') . ':? must be/', $json['errors'][0]);
            $this->assertStringEndsWith("got $got", $json['errors'][0]);
        }
        foreach ([['worker_timeout' => '', 'deadline_margin' => null], ['worker_timeout' => '90', 'deadline_margin' => '0']] as $queue) {
            [$exit, $json] = $this->check([], ['queue' => $queue]);
            $this->assertSame(0, $exit, json_encode($json));
        }
    }

    /** A `funnels` entry that throws at every run fails the jobs using it, naming the entry. */
    public function testAJobFunnelWhoseEntryCannotBeBuiltIsAFinding(): void
    {
        [$w, $r, $n] = [Run::name('fw'), Run::name('fr'), Run::name('fn')];
        $job = fn (string $class, string $name) => self::HEAD . "use Resilient\\Laravel\\Queue\\Funnel;\nuse Resilient\\Laravel\\Queue\\WithinDeadline;\n"
            . "final class $class implements ShouldQueue\n{\n    use JitteredBackoff;\n    public \$timeout = 20;\n    public \$tries = 3;\n"
            . "    public function middleware(): array { return [new Funnel('$name'), new WithinDeadline()]; }\n"
            . "    public function handle(): void { }\n}\n";
        [$exit, $json] = $this->check(
            ['WaitKey' => $job('WaitKey', $w), 'ReserveAll' => $job('ReserveAll', $r), 'NoLimit' => $job('NoLimit', $n)],
            ['funnels' => [
                $w => ['limit' => 3, 'reserve' => 1, 'wait' => 0.05],
                $r => ['limit' => 2, 'reserve' => 2],
                $n => ['reserve' => 1],
            ]],
        );
        $this->assertSame(1, $exit);
        $found = [];
        foreach ($json['findings'] as $f) {
            $found[$this->short($f['job'])] = $f['rule'] . ': ' . $f['message'];
        }
        ksort($found);
        $this->assertSame([
            'NoLimit' => "job funnel: new Funnel('$n') fails at every run: resilient.funnels.$n: 'limit' is required",
            'ReserveAll' => "job funnel: new Funnel('$r') fails at every run: resilient.funnels.$r: reserve: must be between 0 and limit - 1 (1), got 2",
            'WaitKey' => "job funnel: new Funnel('$w') fails at every run: resilient.funnels.$w: unknown key 'wait' (a Funnel takes limit, reserve, lease, share)",
        ], $found);
    }

    /**
     * An empty `check.paths` (`array_filter([env('JOBS_PATH')])` with the variable unset) or
     * an entry that is not a path checks nothing: an error (exit 2), not a silent pass.
     */
    public function testAnEmptyOrMalformedPathListIsAnError(): void
    {
        foreach ([
            [[], 'resilient.check.paths: is empty, so no job would be checked (null checks app/Jobs)'],
            [[[]], 'resilient.check.paths.0: must be a directory path, got array'],
        ] as [$paths, $error]) {
            $this->boot(['clients' => self::CLIENTS, 'check' => ['paths' => $paths]]);
            [$exit, $out] = $this->artisan(['--json' => true]);
            $this->assertSame(2, $exit, $out);
            $this->assertSame([$error], json_decode($out, true)['errors'] ?? $this->fail($out));
        }
    }

    /** A client entry that is not an array cannot be checked: exit 2 naming it, not an exception. */
    public function testAClientEntryThatIsNotAnArrayIsAnError(): void
    {
        $dir = Run::tempDir('check-empty');
        $this->boot(['clients' => self::CLIENTS + ['nothing' => null], 'check' => ['paths' => [$dir]]]);
        [$exit, $out] = $this->artisan(['--json' => true]);
        $this->assertSame(2, $exit, $out);
        $this->assertSame(['resilient.clients.nothing: must be an array of client options, got null'], json_decode($out, true)['errors'] ?? $this->fail($out));
    }

    /**
     * php/README: an option the extension refuses (`'timout'`) throws at every call, and
     * resilient:check reports it beside the rest: exit 2 naming the entry and the option, and a
     * job calling that client is told why, not that the client is undefined (nor for an entry
     * that is not an array).
     */
    public function testAClientEntryEveryCallRefusesIsAnErrorAndItsJobsAreToldWhy(): void
    {
        $job = fn (string $class, string $client) => self::HEAD
            . "final class $class implements ShouldQueue\n{\n    public \$timeout = 120;\n    public \$tries = 1;\n"
            . "    public function handle(): void { Resilient::client('$client')->get('/x'); }\n}\n";
        [$exit, $json] = $this->check(
            ['Typo' => $job('Typo', 'typo'), 'NotAnArray' => $job('NotAnArray', 'bare'), 'OtherName' => $job('OtherName', '1e2'),
                // A $timeout of 0 skips the nesting rule, not the client's name.
                'NoTimeout' => str_replace('$timeout = 120', '$timeout = 0', $job('NoTimeout', 'typo'))],
            ['clients' => self::CLIENTS + [
                'typo' => ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 1, 'timout' => 5],
                'bare' => 'http://127.0.0.1:9',
                '100' => 'http://127.0.0.1:9',   // an int key, that '1e2' equals in a loose comparison
            ]],
        );
        $this->assertSame(2, $exit, json_encode($json));
        $errors = implode("\n", $json['errors'] ?? []);
        $this->assertStringContainsString('resilient.clients.typo', $errors);
        $this->assertStringContainsString("option 'timout': unknown option", $errors);
        $this->assertStringContainsString('resilient.clients.bare: must be an array of client options', $errors);
        $found = [];
        foreach ($json['findings'] as $f) {
            if ($f['rule'] === 'unknown client') {
                $found[$this->short($f['job'])] = $f['message'];
            }
        }
        ksort($found);
        $this->assertSame([
            'NoTimeout' => "calls client 'typo', whose entry in config/resilient.php cannot be built (the error above): every call throws",
            'NotAnArray' => "calls client 'bare', whose entry in config/resilient.php cannot be built (the error above): every call throws",
            'OtherName' => "calls client '1e2', which config/resilient.php does not define",
            'Typo' => "calls client 'typo', whose entry in config/resilient.php cannot be built (the error above): every call throws",
        ], $found);
    }

    /** @return array{0: int, 1: array} exit code and the --json output */
    private function check(array $jobs, array $resilient = [], array $laravel = []): array
    {
        $dir = Run::tempDir('check-edge');
        $namespace = 'CheckEdge' . bin2hex(random_bytes(4));
        foreach ($jobs as $class => $source) {
            file_put_contents("$dir/$class.php", "<?php\n\nnamespace $namespace;\n\n$source");
            require "$dir/$class.php";
        }
        $this->boot($resilient + ['clients' => self::CLIENTS, 'check' => ['paths' => [$dir]]], $laravel);
        [$exit, $out] = $this->artisan(['--json' => true]);

        return [$exit, json_decode($out, true) ?? $this->fail($out)];
    }

    /** @return array{0: int, 1: string} */
    private function artisan(array $input): array
    {
        $command = new CheckCommand();
        $command->setLaravel($this->app);
        $output = new BufferedOutput();
        $exit = $command->run(new ArrayInput($input), $output);

        return [$exit, $output->fetch()];
    }

    private function short(string $class): string
    {
        return substr($class, strrpos($class, '\\') + 1);
    }
}
