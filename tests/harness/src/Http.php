<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/** Minimal HTTP GETs (curl extension) for talking to the fixture app; every call has a timeout. */
final class Http
{
    public function __construct(public readonly int $status, public readonly string $body)
    {
    }

    public static function get(string $url, float $timeout = 20.0): self
    {
        $ch = self::handle($url, $timeout);
        $body = curl_exec($ch);
        $status = (int) curl_getinfo($ch, CURLINFO_RESPONSE_CODE);
        curl_close($ch);
        return new self($status, is_string($body) ? $body : '');
    }

    /** @return \CurlHandle */
    public static function handle(string $url, float $timeout)
    {
        $ch = curl_init($url);
        curl_setopt_array($ch, [
            CURLOPT_RETURNTRANSFER => true,
            CURLOPT_TIMEOUT_MS => (int) ($timeout * 1000),
            CURLOPT_CONNECTTIMEOUT_MS => 2000,
            CURLOPT_NOPROXY => '*',
        ]);
        return $ch;
    }
}
