<?php
/**
 * The checkout page of the lab: asks the upstream for a shipping quote through the variant the
 * runner chose for this FPM pool (env LAB_VARIANT) and answers JSON:
 *   {"status":"live", ...}      the upstream answered within the deadline
 *   {"status":"fallback", ...}  our side refused or gave up (reason), with an estimate (never 0)
 *   HTTP 500 {"status":"error"} anything else (a bug or an unexpected upstream answer)
 */
declare(strict_types=1);

require __DIR__.'/../src/QuoteUnavailable.php';
require __DIR__.'/../src/Page.php';

$started = hrtime(true);
$variant = (string) getenv('LAB_VARIANT');
$postcode = (string) ($_GET['postcode'] ?? '10110');

try {
    $quote = match ($variant) {
        'naive' => (function () use ($postcode) {
            require __DIR__.'/../src/NaiveQuoteClient.php';
            return (new NaiveQuoteClient(Page::upstreamUrl(), Page::deadlineMs()))->quote($postcode);
        })(),
        'laravel' => (function () use ($postcode) {
            require __DIR__.'/../src/Laravel/bootstrap.php';
            $client = new App\Services\ShippingQuoteClient(
                new App\Support\RetryBudget('shipping-quote'),
                Page::upstreamUrl(),
                Page::deadlineMs(),
            );
            return $client->quote($postcode);
        })(),
        // resilient: the funnel waits LAB_FUNNEL_WAIT_MS for a slot; resilient-failfast: the
        // runner sets 0, the contract's default (fail fast).
        'resilient', 'resilient-failfast' => (function () use ($postcode) {
            require __DIR__.'/../src/ResilientQuoteClient.php';
            return (new ResilientQuoteClient(Page::upstreamUrl(), Page::deadlineMs(), Page::funnelWaitMs()))->quote($postcode);
        })(),
        default => throw new LogicException("unknown LAB_VARIANT '{$variant}'"),
    };
    Page::live($variant, $quote, $started);
} catch (QuoteUnavailable $e) {
    Page::fallback($variant, $e->reason, $started);
} catch (Throwable $e) {
    Page::error($variant, $e, $started);
}
