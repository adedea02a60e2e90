<?php

// Named upstreams. Each entry is the options array of `new Resilient\Client($name, $options)`;
// see the extension's README for every key. Unknown keys are an error, so a typo fails loudly.
// Elsewhere in this file, the keys below are the ones the package reads: resilient:doctor and
// resilient:check name any other (`log_chanel`, `queue.release_delays`).
//
// One class per upstream should own the retries (the "one retry owner" rule): call
// Resilient::client('shipping') (or Http::resilient('shipping')) there and nowhere else.
//
// No closures here: `php artisan config:cache` cannot write one. Attempts are reported by the
// package instead (an AttemptMade event per attempt, and a log line with `log_channel`).

return [
    // A log channel (config/logging.php) that gets one line per attempt; null = no log.
    // Lines carry client, method, URL without query, attempt, status/error, duration, decision;
    // never a header.
    'log_channel' => env('RESILIENT_LOG_CHANNEL'),

    // Dispatch Resilient\Laravel\Events\AttemptMade for every attempt.
    'events' => (bool) env('RESILIENT_EVENTS', true),

    // Options every client gets unless its own entry sets them; null = the extension's default.
    'defaults' => [
        'connect_timeout' => env('RESILIENT_CONNECT_TIMEOUT'),
        'timeout' => env('RESILIENT_TIMEOUT'),
        'deadline' => env('RESILIENT_DEADLINE'),
        'max_attempts' => env('RESILIENT_MAX_ATTEMPTS'),
        // 'shm' (this host) or a redis:// URL (one limit for every host, docs/redis.md).
        'backend' => env('RESILIENT_BACKEND'),
        // With Redis: what to do when it is down or slow: 'local', 'open' or 'closed'.
        'on_backend_error' => env('RESILIENT_ON_BACKEND_ERROR'),
        // 'web' for Octane (Swoole/RoadRunner report SAPI cli): web caps and reserved slots.
        // Queue workers must keep 'auto' (unset). With config:cache every process reads the
        // same cached value, workers too: then declare Octane web with the ini setting
        // instead (php -d resilient.context=web artisan octane:start). Any other value is
        // refused by clients and by the funnels and budgets this package builds (and named
        // by resilient:doctor); a `new Resilient\Funnel` of your own reads the ini setting.
        'context' => env('RESILIENT_CONTEXT'),
    ],

    'clients' => [
        // 'shipping' => [
        //     'base_url'        => env('SHIPPING_URL', 'https://api.shipping.example'),
        //     'connect_timeout' => env('SHIPPING_CONNECT_TIMEOUT', 0.3),
        //     'timeout'         => env('SHIPPING_TIMEOUT', 0.3),
        //     'deadline'        => env('SHIPPING_DEADLINE', 0.85),
        //     'max_attempts'    => env('SHIPPING_MAX_ATTEMPTS', 3),
        //     'backoff'         => ['base' => 0.025, 'cap' => 0.2],
        //     'retry_on'        => [429, 503],
        //     'funnel'          => ['limit' => (int) env('SHIPPING_FUNNEL_LIMIT', 10), 'reserve' => 3],
        //     // or a limit learned from latency and drops: ['limit' => 'auto', 'min' => 2, 'max' => 32]
        //     'budget'          => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0],
        //     'circuit'         => ['failure_ratio' => 0.5, 'min_calls' => 20, 'window' => 10.0, 'open_for' => 5.0],
        //     // 'allow_redirects' => false,   // unset: Http::resilient() follows up to 5, as Laravel does
        // ],
    ],

    // Queued jobs (Resilient\Laravel\Queue\*).
    'queue' => [
        // ReleaseWhenUnavailable / Funnel: a refused job comes back after a delay drawn from
        // [min, max] seconds (an end over 39600 is taken as 11 h), so refused jobs do not
        // return in step; after a spent retry budget, no sooner than the job's own backoff.
        'release_delay' => [5, 30],
        // WithinDeadline() without an argument: the job's $timeout (else worker_timeout, as
        // `queue:work --timeout`) minus this margin; null = a tenth of it, at least 1 s.
        // A timeout of 0 is none (as for the worker): no deadline from it.
        'deadline_margin' => env('RESILIENT_DEADLINE_MARGIN'),
        'worker_timeout' => env('RESILIENT_WORKER_TIMEOUT', 60),
    ],

    // `php artisan resilient:check`: where the job classes are (default app/Jobs).
    'check' => [
        'paths' => null,
    ],

    // Funnels and budgets used directly (Resilient::funnel('sap')), by name. A client's own
    // funnel and budget are reachable by the client's name too (Resilient::budget('shipping');
    // such a funnel leases for its funnel.lease, else 20 s: see README).
    'funnels' => [
        // 'sap' => ['limit' => 15, 'reserve' => 3, 'lease' => 20.0],  // 'share' => true: see README
    ],
    'budgets' => [
        // 'sap' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0],
    ],
];
