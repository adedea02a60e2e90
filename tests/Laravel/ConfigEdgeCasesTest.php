<?php

declare(strict_types=1);

namespace Resilient\Tests\Laravel;

require_once __DIR__ . '/support/PackageTestCase.php';

use Resilient\Laravel\Console\UpstreamStatus;
use Resilient\Laravel\Facades\Resilient;
use Resilient\Laravel\ResilientManager;
use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;

/**
 * config/resilient.php as apps write it, mistakes included: a null (an unset env()) inside an
 * option section, an entry that is not an array, a bad option, a `funnels` entry no Funnel can be
 * built from. Each error names the config key to fix.
 */
final class ConfigEdgeCasesTest extends PackageTestCase
{
    /** A null inside `funnel`, `budget` or `headers` is "not set", as at the top level (README). */
    public function testANullInsideAnOptionSectionMeansNotSet(): void
    {
        [$name, $key, $client] = $this->upstreamClient('cfg-nested-null', ['max_attempts' => 1]);
        $this->up->script($key, [['status' => 200]]);
        $this->boot(['clients' => [$name => $client + [
            'funnel' => ['limit' => 4, 'reserve' => env('RESILIENT_TEST_UNSET_RESERVE')],
            'budget' => ['ratio' => null, 'floor' => 2],
            'headers' => ['X-Api-Key' => env('RESILIENT_TEST_UNSET_KEY'), 'X-App' => 'a'],
        ]]]);

        $config = Resilient::clientConfig($name);
        $this->assertSame(['limit' => 4], $config['funnel']);
        $this->assertSame(['floor' => 2], $config['budget']);
        $this->assertSame(['X-App' => 'a'], $config['headers']);
        $this->assertSame(200, Resilient::client($name)->get('/x')->status());
        $this->assertSame(0, Resilient::funnel($name)->reserve());
        $this->assertSame(2, Resilient::budget($name)->stats()['floor']);
    }

    /** The extension's message names the option; the package adds which client's entry holds it. */
    public function testABadOptionNamesTheClientsEntry(): void
    {
        $name = Run::name('cfg-bad');
        $this->boot(['clients' => [$name => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 'abc']]]);
        try {
            Resilient::client($name);
            $this->fail('a bad timeout must throw');
        } catch (\TypeError $e) {
            $this->assertSame("resilient.clients.$name: option 'timeout' must be of type float, string given", $e->getMessage());
            $this->assertInstanceOf(\TypeError::class, $e->getPrevious());
        }

        $this->boot(['clients' => [$name => ['base_url' => 'http://127.0.0.1:9', 'max_attempts' => 0]]]);
        $this->expectException(\ValueError::class);
        $this->expectExceptionMessage("resilient.clients.$name: option 'max_attempts': must be an integer between 1 and 100, got 0");
        Resilient::client($name);
    }

    /** A bad value the client takes from `defaults` (an .env value) is named there, not in the client's entry. */
    public function testABadDefaultIsNamedInDefaults(): void
    {
        $name = Run::name('cfg-bad-default');
        $this->boot([
            'defaults' => ['connect_timeout' => '0.3s'],
            'clients' => [$name => ['base_url' => 'http://127.0.0.1:9']],
        ]);
        try {
            Resilient::client($name);
            $this->fail('a bad default must throw');
        } catch (\TypeError $e) {
            $this->assertSame("resilient.defaults.connect_timeout (taken by client $name): option 'connect_timeout' must be of type float, string given", $e->getMessage());
        }
        // The client's own value wins, and is named in its entry.
        $this->boot([
            'defaults' => ['timeout' => 'abc'],
            'clients' => [$name => ['base_url' => 'http://127.0.0.1:9', 'timeout' => 'xyz']],
        ]);
        $this->expectExceptionMessage("resilient.clients.$name: option 'timeout' must be of type float, string given");
        Resilient::client($name);
    }

    /** A client's own funnel (a fixed limit) is a name Resilient::funnel() and Queue\\Funnel take: listed too. */
    public function testAnUnknownFunnelNameListsTheClientsFunnelsToo(): void
    {
        $this->boot(['clients' => [
            'shipping' => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 10, 'reserve' => 3]],
            'learned' => ['base_url' => 'http://127.0.0.1:9', 'funnel' => ['limit' => 'auto']],
            'plain' => ['base_url' => 'http://127.0.0.1:9'],
        ]]);
        $this->expectException(\InvalidArgumentException::class);
        $this->expectExceptionMessage('no funnel named "sap" in config/resilient.php (known: shipping)');
        Resilient::funnel('sap');
    }

    public function testAClientEntryThatIsNotAnArrayIsAClearError(): void
    {
        $this->boot(['clients' => ['nothing' => null, 'url' => 'https://api.example']]);
        foreach (['nothing' => 'null', 'url' => 'string'] as $name => $type) {
            try {
                Resilient::client($name);
                $this->fail("clients.$name must be refused");
            } catch (\InvalidArgumentException $e) {
                $this->assertSame("resilient.clients.$name: must be an array of client options, got $type", $e->getMessage());
            }
        }
    }

    /**
     * A whole section of the wrong type (`'clients' => 'shipping'`) is named, as a bad entry is,
     * by the facade and by the three commands (before: PHP's own foreach() / array_keys()
     * errors). A null section is an empty one.
     */
    public function testASectionThatIsNotAnArrayNamesTheSection(): void
    {
        $this->boot(['clients' => 'shipping', 'funnels' => 'x', 'budgets' => 5, 'defaults' => 'web']);
        $said = fn (string $section, string $type) => "resilient.$section: must be an array of entries by name, got $type";
        foreach ([
            [fn () => Resilient::client('shipping'), $said('clients', 'string')],
            [fn () => Resilient::funnel('x'), $said('funnels', 'string')],
            [fn () => Resilient::budget('x'), $said('budgets', 'int')],
            [fn () => UpstreamStatus::of((array) $this->app['config']->get('resilient'), $this->app->make(ResilientManager::class)), $said('clients', 'string')],
        ] as $i => [$call, $message]) {
            try {
                $call();
                $this->fail("call $i accepted the section");
            } catch (\InvalidArgumentException $e) {
                $this->assertSame($message, $e->getMessage(), "call $i");
            }
        }
        // doctor and check report it beside everything else.
        $problems = [];
        $this->assertSame([], $this->app->make(ResilientManager::class)->clientConfigs($problems));
        $this->assertSame([$said('clients', 'string')], $problems);
        $this->boot(['clients' => ['a' => ['base_url' => 'http://127.0.0.1:9']], 'defaults' => 'web']);
        $this->expectExceptionMessage($said('defaults', 'string'));
        Resilient::client('a');
    }

    public function testANullSectionIsAnEmptyOne(): void
    {
        $this->boot(['clients' => null, 'funnels' => null, 'budgets' => null, 'defaults' => null]);
        $this->assertSame([], $this->app->make(ResilientManager::class)->clientConfigs());
        $this->assertSame([], UpstreamStatus::of((array) $this->app['config']->get('resilient'), $this->app->make(ResilientManager::class)));
        $this->expectExceptionMessage('no client named "a" in config/resilient.php (known: none)');
        Resilient::client('a');
    }

    /**
     * A budget with no floor that nothing used has no retry to give yet, but nothing was spent:
     * resilient:status said "retry budget spent" and exited 1 on a quiet host. Once retries were
     * spent down to less than one, it is.
     */
    public function testAnIdleBudgetWithoutAFloorIsNotSpent(): void
    {
        $name = \Resilient\Tests\Harness\Run::name('idle-budget');
        $this->boot(['budgets' => [$name => ['ratio' => 0.1, 'floor' => 0, 'window' => 60.0]]]);
        $status = fn () => UpstreamStatus::of((array) $this->app['config']->get('resilient'), $this->app->make(ResilientManager::class))[$name];
        $this->assertSame([], $status()['trouble']);
        $this->assertFalse($status()['budget']['spent']);
        $budget = Resilient::budget($name);
        for ($i = 0; $i < 10; $i++) {
            $budget->recordOriginal();
        }
        $this->assertTrue($budget->tryConsume());
        $this->assertSame(['retry budget spent: 1 retries of 1.0 allowed'], $status()['trouble']);
    }

    /** Resilient::budget() of an entry that cannot build a RetryBudget names the entry, as funnel() does. */
    public function testABudgetEntryThatCannotBeBuiltNamesTheEntry(): void
    {
        [$neg, $typo, $text, $c] = [Run::name('bn'), Run::name('bt'), Run::name('bs'), Run::name('bc')];
        $this->boot([
            'budgets' => [$neg => ['ratio' => -1], $typo => ['ratoi' => 0.1], $text => ['ratio' => 'abc']],
            'clients' => [$c => ['base_url' => 'http://127.0.0.1:9', 'budget' => ['window' => 0]]],
        ]);
        $this->assertEachRefused(fn (string $name) => Resilient::budget($name), [
            $neg => "resilient.budgets.$neg: ratio: must be a finite number >= 0, got -1",
            $typo => "resilient.budgets.$typo: unknown key 'ratoi' (a RetryBudget takes ratio, floor, window)",
            $text => "resilient.budgets.$text: Resilient\\RetryBudget::__construct(): Argument #2 (\$ratio) must be of type float, string given",
            $c => "resilient.clients.$c.budget: window: must be greater than zero",
        ]);
    }

    /** A `budgets` entry by position (`[0.1, 5, 60]`) reads as `new RetryBudget($name, 0.1, 5, 60)`, as it always did. */
    public function testABudgetEntryByPositionIsRatioFloorWindow(): void
    {
        [$all, $mixed] = [Run::name('bp'), Run::name('bm')];
        $this->boot(['budgets' => [$all => [0.2, 7, 30.0], $mixed => [0.3, 'window' => 20.0]]]);
        $s = Resilient::budget($all)->stats();
        $this->assertSame([0.2, 7, 30.0], [$s['ratio'], $s['floor'], $s['window']]);
        $this->assertSame(20.0, Resilient::budget($mixed)->stats()['window']);
    }

    /** A name added to the config after the manager was first used is found (a test's `config([...])`). */
    public function testANameAddedToTheConfigLaterIsFound(): void
    {
        [$first, $later, $funnel] = [Run::name('cf'), Run::name('cl'), Run::name('cfl')];
        $this->boot(['clients' => [$first => ['base_url' => 'http://127.0.0.1:9']]]);
        Resilient::client($first);
        config(["resilient.clients.$later" => ['base_url' => 'http://127.0.0.1:9'], "resilient.funnels.$funnel" => ['limit' => 3]]);
        $this->assertSame($later, Resilient::client($later)->name());
        $this->assertSame(3, Resilient::funnel($funnel)->limit());
    }

    /** Resilient::funnel() of a `funnels` entry that cannot build a Funnel names the entry. */
    public function testAFunnelEntryThatCannotBeBuiltNamesTheEntry(): void
    {
        [$w, $r, $n] = [Run::name('cw'), Run::name('cr'), Run::name('cn')];
        $this->boot(['funnels' => [
            $w => ['limit' => 3, 'reserve' => 1, 'wait' => 0.05],
            $r => ['limit' => 2, 'reserve' => 2],
            $n => ['reserve' => 1],
        ]]);
        $this->assertEachRefused(fn (string $name) => Resilient::funnel($name), [
            $w => "resilient.funnels.$w: unknown key 'wait' (a Funnel takes limit, reserve, lease, share)",
            $r => "resilient.funnels.$r: reserve: must be between 0 and limit - 1 (1), got 2",
            $n => "resilient.funnels.$n: 'limit' is required",
        ]);
    }

    /** A `funnels` entry written by position (`[15, 3]`) reads as `new Funnel($name, 15, 3)`, as it always did. */
    public function testAFunnelEntryByPositionIsLimitThenReserve(): void
    {
        $name = Run::name('cp');
        $this->boot(['funnels' => [$name => [15, 3]]]);
        $funnel = Resilient::funnel($name);
        $this->assertSame([15, 3], [$funnel->limit(), $funnel->reserve()]);
    }

    /** Without the extension, Resilient::within() says how to install it, as Resilient::client() does. */
    public function testWithinWithoutTheExtensionSaysHowToInstallIt(): void
    {
        $code = self::childApp([]) . <<<'PHP'
            $app->boot();
            try {
                Resilient\Laravel\Facades\Resilient::within(1.0, fn () => 'ran');
            } catch (Throwable $e) {
                echo get_class($e), ': ', $e->getMessage(), "\n";
            }
            PHP;
        $result = PhpProcess::code($code, [], ['RESILIENT_SO' => '/nonexistent/resilient.so', 'APP_RUNNING_IN_CONSOLE' => 'true'])->wait(20);
        $this->assertStringStartsWith('RuntimeException: resilient/laravel needs the resilient PHP extension (ext-resilient ^0.1), but it is not loaded', $result->stdout, $result->describe());
        $this->assertStringContainsString('make install', $result->stdout);
    }

    /**
     * $make of each name throws InvalidArgumentException with exactly its message.
     *
     * @param array<string, string> $messages by name
     */
    private function assertEachRefused(\Closure $make, array $messages): void
    {
        foreach ($messages as $name => $message) {
            try {
                $make((string) $name);
                $this->fail("$name must be refused");
            } catch (\InvalidArgumentException $e) {
                $this->assertSame($message, $e->getMessage());
            }
        }
    }
}
