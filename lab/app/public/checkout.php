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

require __DIR__.'/../src/Quotes.php';

try {
    $quote = Quotes::quote($variant, $postcode, Page::deadlineMs(), Page::requestId());
    Page::live($variant, $quote, $started);
} catch (QuoteUnavailable $e) {
    Page::fallback($variant, $e->reason, $started);
} catch (Throwable $e) {
    Page::error($variant, $e, $started);
}
