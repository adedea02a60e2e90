<?php
/**
 * A background worker of the `mixed` scenario: a PHP CLI process (console context, so the
 * resilient funnel lets it use only limit - reserve slots) calling the upstream in a closed loop
 * through the variant's own client, funnel and budget, from LAB_BG_FROM_UNIX_MS (the lab's t0,
 * after it reset the upstream's and the extension's counts) until LAB_BG_UNTIL_UNIX_MS. A call that
 * did not get a live answer is a job released back with a short delay (10 ms) before the next.
 *
 * One CSV line per call to LAB_BG_OUT: start_unix_ms,latency_ms,outcome,reason
 * (outcome live | fallback | error). Every attempt carries X-Request-Id b-<worker>-<n>.
 */
declare(strict_types=1);

require __DIR__.'/../src/QuoteUnavailable.php';
require __DIR__.'/../src/Page.php';
require __DIR__.'/../src/Quotes.php';

$variant = (string) getenv('LAB_VARIANT');
$until = (float) getenv('LAB_BG_UNTIL_UNIX_MS');
$deadlineMs = (int) (getenv('LAB_BG_DEADLINE_MS') ?: 2000);
$worker = (string) getenv('LAB_BG_ID');
$out = fopen((string) getenv('LAB_BG_OUT'), 'w');
if ($out === false || $until <= 0) {
    fwrite(STDERR, "background: LAB_BG_OUT and LAB_BG_UNTIL_UNIX_MS are required\n");
    exit(2);
}

$from = (float) getenv('LAB_BG_FROM_UNIX_MS');
$wait = $from - microtime(true) * 1000;
if ($wait > 0) {
    usleep((int) ($wait * 1000));
}

$n = 0;
while (($now = microtime(true) * 1000) < $until) {
    $started = hrtime(true);
    $reason = '';
    try {
        Quotes::quote($variant, '10110', $deadlineMs, "b-{$worker}-".(++$n));
        $outcome = 'live';
    } catch (QuoteUnavailable $e) {
        $outcome = 'fallback';
        $reason = $e->reason;
    } catch (Throwable $e) {
        $outcome = 'error';
        $reason = get_class($e);
        error_log('lab background error: '.get_class($e).': '.$e->getMessage());
    }
    fwrite($out, sprintf("%.3f,%.3f,%s,%s\n", $now, (hrtime(true) - $started) / 1e6, $outcome, $reason));
    fflush($out);
    if ($outcome !== 'live') {
        usleep(10_000);
    }
}
