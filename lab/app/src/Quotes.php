<?php
declare(strict_types=1);

/**
 * The variant's quote call, shared by the web page (public/checkout.php) and the background
 * workers (bin/background.php), so both go through the same client, funnel and budget.
 * `$requestId` goes out as X-Request-Id on every attempt of the call: the upstream's rows then
 * tell web from background ("b-" prefix) and attempts from calls.
 */
final class Quotes
{
    public static function quote(string $variant, string $postcode, int $deadlineMs, string $requestId): array
    {
        return match ($variant) {
            'naive' => (function () use ($postcode, $deadlineMs, $requestId) {
                require_once __DIR__.'/NaiveQuoteClient.php';
                return (new NaiveQuoteClient(Page::upstreamUrl(), $deadlineMs))->quote($postcode, $requestId);
            })(),
            'laravel' => (function () use ($postcode, $deadlineMs, $requestId) {
                require_once __DIR__.'/Laravel/bootstrap.php';
                $client = new App\Services\ShippingQuoteClient(
                    new App\Support\RetryBudget('shipping-quote'),
                    Page::upstreamUrl(),
                    $deadlineMs,
                );
                return $client->quote($postcode, $requestId);
            })(),
            // resilient: the funnel waits LAB_FUNNEL_WAIT_MS for a slot; resilient-failfast: the
            // runner sets 0, the contract's default (fail fast); resilient-breaker: resilient
            // plus the circuit option. LAB_FUNNEL_RESERVE: slots kept for web (mixed only);
            // LAB_FUNNEL_SHARE=1: the funnel's share option (mixed only).
            // resilient-16 and resilient-adaptive: the funnel limit 16 or 'auto' (LAB_FUNNEL_LIMIT).
            // resilient-redis: resilient with the Redis backend (the two-hosts scenario).
            'resilient', 'resilient-failfast', 'resilient-breaker', 'resilient-16', 'resilient-adaptive', 'resilient-redis' => (function () use ($variant, $postcode, $deadlineMs, $requestId) {
                require_once __DIR__.'/ResilientQuoteClient.php';
                return (new ResilientQuoteClient(
                    Page::upstreamUrl(),
                    $deadlineMs,
                    Page::funnelWaitMs(),
                    Page::funnelReserve(),
                    $variant === 'resilient-breaker',
                    Page::funnelLimit(),
                    Page::backend($variant),
                    Page::funnelShare(),
                    Page::budget(),
                ))->quote($postcode, $requestId);
            })(),
            default => throw new LogicException("unknown LAB_VARIANT '{$variant}'"),
        };
    }
}
