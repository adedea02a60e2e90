<?php

namespace Resilient\Laravel;

use InvalidArgumentException;
use Resilient\Client;
use Resilient\Deadline;
use Resilient\Funnel;
use Resilient\RetryBudget;

/**
 * Builds the extension's objects from config, once per name per process.
 *
 * The objects themselves are cheap: their counters live in shared memory, so a fresh
 * object in every request sees the same funnel and budget as every other worker.
 */
final class ResilientManager
{
    /** @var array<string, Client> */
    private array $clients = [];

    /** @param array{clients?: array, funnels?: array, budgets?: array} $config */
    public function __construct(private array $config)
    {
    }

    public function client(string $name): Client
    {
        return $this->clients[$name] ??= new Client($name, $this->section('clients', $name));
    }

    public function funnel(string $name): Funnel
    {
        $o = $this->section('funnels', $name);

        return new Funnel($name, ...$o);
    }

    public function budget(string $name): RetryBudget
    {
        $o = $this->section('budgets', $name);

        return new RetryBudget($name, ...$o);
    }

    /** Runs $fn with every call inside sharing one deadline of $seconds (the earlier wins when nested). */
    public function within(float $seconds, callable $fn): mixed
    {
        return Deadline::within($seconds, $fn);
    }

    private function section(string $section, string $name): array
    {
        $all = $this->config[$section] ?? [];
        if (! array_key_exists($name, $all)) {
            throw new InvalidArgumentException(sprintf(
                'resilient: no %s named "%s" in config/resilient.php (known: %s)',
                rtrim($section, 's'),
                $name,
                $all ? implode(', ', array_keys($all)) : 'none',
            ));
        }

        return $all[$name];
    }
}
