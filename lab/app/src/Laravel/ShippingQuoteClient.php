<?php
declare(strict_types=1);

namespace App\Services;

use App\Exceptions\ShippingQuoteBusy;
use App\Support\RetryBudget;
use Illuminate\Http\Client\ConnectionException;
use Illuminate\Support\Facades\Http;
use Illuminate\Support\Facades\Redis;
use LogicException;
use QuoteUnavailable;

/**
 * Seed 000's ShippingQuoteClient on Laravel 8 parts, as close to the article as Laravel 8 allows:
 * - funnel limit 4 (the lab upstream's capacity; the article uses 10 for its real carrier);
 * - Laravel 8 has no connectTimeout() and timeout() takes whole seconds, so the per-attempt
 *   min(300 ms, remaining) goes through withOptions();
 * - Sleep::usleep (Laravel 10) is plain usleep();
 * - the article's ShippingQuoteUnavailable carries a reason here (QuoteUnavailable) so the lab can
 *   count funnel refusals, budget refusals, deadline and upstream failures apart;
 * - the URL and the deadline come from the lab, and every attempt carries the lab's
 *   X-Request-Id (so the upstream's rows tell web from background calls).
 */
final class ShippingQuoteClient
{
    private const MAX_ATTEMPTS = 3;

    public function __construct(private RetryBudget $budget, private string $url, private int $deadlineMs) {}

    public function quote(string $postcode, string $requestId = ''): array
    {
        $deadline = hrtime(true) + $this->deadlineMs * 1_000_000;
        $this->budget->recordOriginal();

        for ($attempt = 1; $attempt <= self::MAX_ATTEMPTS; $attempt++) {
            if ($this->remainingMs($deadline) < 50) {
                throw new QuoteUnavailable('deadline', 'หมดเวลาของงานนี้แล้ว');
            }

            if ($attempt > 1 && ! $this->budget->tryConsume()) {
                throw new QuoteUnavailable('budget', 'ใช้โควตา retry หมดแล้ว');
            }

            try {
                return $this->attempt($postcode, min(300, $this->remainingMs($deadline)), $requestId);
            } catch (ConnectionException|ShippingQuoteBusy $e) {
                $delayMs = random_int(0, min(200, 25 * 2 ** ($attempt - 1)));

                if ($attempt === self::MAX_ATTEMPTS || $this->remainingMs($deadline) < $delayMs + 50) {
                    throw new QuoteUnavailable('upstream', 'ขนส่งยังไม่ตอบ', $e);
                }

                usleep($delayMs * 1000);
            }
        }

        throw new LogicException('loop ต้อง return หรือ throw ก่อนถึงตรงนี้');
    }

    private function attempt(string $postcode, int $timeoutMs, string $requestId): array
    {
        return Redis::funnel('shipping-quote')
            ->limit(4)
            ->releaseAfter(5)
            ->block(0)
            ->then(
                function () use ($postcode, $timeoutMs, $requestId) {
                    $response = Http::withOptions([
                        'connect_timeout' => $timeoutMs / 1000,
                        'timeout' => $timeoutMs / 1000,
                    ])->withHeaders($requestId !== '' ? ['X-Request-Id' => $requestId] : [])->get($this->url, ['postcode' => $postcode]);

                    if (in_array($response->status(), [429, 503])) {
                        throw new ShippingQuoteBusy();
                    }

                    return $response->throw()->json();
                },
                fn () => throw new QuoteUnavailable('funnel_full', 'คิวเรียกขนส่งเต็ม'),
            );
    }

    private function remainingMs(int $deadline): int
    {
        return (int) floor(($deadline - hrtime(true)) / 1_000_000);
    }
}
