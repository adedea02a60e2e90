<?php

namespace Resilient\Laravel\Console\Check;

/**
 * How long and how many times a named client may call its upstream, from its options in
 * config/resilient.php and the extension's defaults (timeout 30 s, 3 attempts, no deadline,
 * Retry-After waits up to 30 s).
 */
final class ClientLimits
{
    private function __construct(
        public readonly string $name,
        public readonly int $maxAttempts,
        public readonly ?float $deadline,
        public readonly float $worstCase,
    ) {
    }

    public static function of(string $name, array $o): self
    {
        $attempts = max(1, (int) ($o['max_attempts'] ?? 3));
        $deadline = isset($o['deadline']) && is_numeric($o['deadline']) ? (float) $o['deadline'] : null;
        $timeout = (float) ($o['timeout'] ?? 30.0);
        $sleep = max((float) ($o['max_retry_after'] ?? 30.0), (float) ($o['backoff']['cap'] ?? 0.2));
        // Without a deadline only the attempts bound the call: every attempt its full timeout,
        // every sleep the longest Retry-After the client accepts.
        $worst = $deadline ?? ($attempts * $timeout + ($attempts - 1) * $sleep);

        return new self($name, $attempts, $deadline, $worst);
    }

    public function describe(): string
    {
        return $this->deadline !== null
            ? sprintf('%s: deadline %gs', $this->name, $this->deadline)
            : sprintf('%s: no deadline, up to %gs over %d attempts', $this->name, $this->worstCase, $this->maxAttempts);
    }
}
