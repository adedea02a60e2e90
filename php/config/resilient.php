<?php

// Named upstreams. Each entry is the options array of `new Resilient\Client($name, $options)`;
// see the extension's README for every key. Unknown keys are an error, so a typo fails loudly.
//
// One class per upstream should own the retries (the "one retry owner" rule): call
// Resilient::client('shipping') there and nowhere else.

return [
    'clients' => [
        // 'shipping' => [
        //     'base_url'        => env('SHIPPING_URL', 'https://api.shipping.example'),
        //     'connect_timeout' => 0.3,
        //     'timeout'         => 0.3,
        //     'deadline'        => 0.85,
        //     'max_attempts'    => 3,
        //     'backoff'         => ['base' => 0.025, 'cap' => 0.2],
        //     'retry_on'        => [429, 503],
        //     'funnel'          => ['limit' => 10, 'reserve' => 3],
        //     'budget'          => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0],
        // ],
    ],

    // Funnels and budgets used directly (Resilient::funnel('sap')), by name.
    'funnels' => [
        // 'sap' => ['limit' => 15, 'reserve' => 3, 'lease' => 20.0],
    ],
    'budgets' => [
        // 'sap' => ['ratio' => 0.1, 'floor' => 5, 'window' => 60.0],
    ],
];
