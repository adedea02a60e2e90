<?php
declare(strict_types=1);

/**
 * The storm: 3 attempts with a fixed 100 ms sleep, no funnel, no budget, no jitter.
 * It keeps the same deadline as the other variants (each attempt gets min(300 ms, remaining)),
 * but does not ask whether the remainder is worth another attempt.
 */
final class NaiveQuoteClient
{
    private const MAX_ATTEMPTS = 3;
    private const SLEEP_MS = 100;
    private const ATTEMPT_TIMEOUT_MS = 300;

    public function __construct(private string $url, private int $deadlineMs) {}

    public function quote(string $postcode, string $requestId = ''): array
    {
        $deadline = hrtime(true) + $this->deadlineMs * 1_000_000;
        $ch = curl_init();
        $last = '';
        for ($attempt = 1; $attempt <= self::MAX_ATTEMPTS; $attempt++) {
            $remaining = intdiv($deadline - hrtime(true), 1_000_000);
            if ($remaining < 1) {
                throw new QuoteUnavailable('deadline', "deadline after {$attempt} attempts: {$last}");
            }
            $timeout = min(self::ATTEMPT_TIMEOUT_MS, $remaining);
            curl_setopt_array($ch, [
                CURLOPT_URL => $this->url.'?'.http_build_query(['postcode' => $postcode]),
                CURLOPT_RETURNTRANSFER => true,
                CURLOPT_NOSIGNAL => true,
                CURLOPT_CONNECTTIMEOUT_MS => $timeout,
                CURLOPT_TIMEOUT_MS => $timeout,
                CURLOPT_HTTPHEADER => $requestId !== '' ? ['X-Request-Id: '.$requestId] : [],
            ]);
            $body = curl_exec($ch);
            $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
            if ($body !== false && $status === 200) {
                return json_decode((string) $body, true, 512, JSON_THROW_ON_ERROR);
            }
            $last = $body === false ? curl_error($ch) : "HTTP {$status}";
            if ($attempt < self::MAX_ATTEMPTS) {
                usleep(self::SLEEP_MS * 1000);
            }
        }
        throw new QuoteUnavailable('upstream', "gave up after 3 attempts: {$last}");
    }
}
