<?php
/**
 * The extension's own metrics, read by the lab at the end of a run: Resilient\Metrics::snapshot()
 * as JSON when the extension has it (issue 11), {"available": false} otherwise; `?reset=1` first
 * resets the `shipping` counters (Metrics::reset, right after the warm-up). Touches no upstream.
 */
header('Content-Type: application/json');
if (! class_exists('Resilient\Metrics')) {
    echo json_encode(['available' => false, 'why' => 'no Resilient\Metrics in this build']);
    return;
}
try {
    // ?learned=1: only the funnel's learned limit (sampled every 250 ms during the run).
    if (($_GET['learned'] ?? '') === '1') {
        $stats = method_exists('Resilient\Funnel', 'stats') ? (new Resilient\Funnel('shipping', 64))->stats() : [];
        echo json_encode(['learned' => $stats['learned'] ?? null]);
        return;
    }
    // ?reset=1 after the warm-up, so the snapshot covers what the upstream's rows cover.
    if (($_GET['reset'] ?? '') === '1' && method_exists('Resilient\Metrics', 'reset')) {
        Resilient\Metrics::reset('shipping');
    }
    echo json_encode(['available' => true, 'snapshot' => Resilient\Metrics::snapshot()]);
} catch (Throwable $e) {
    echo json_encode(['available' => false, 'why' => get_class($e).': '.$e->getMessage()]);
}
