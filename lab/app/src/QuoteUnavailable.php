<?php
declare(strict_types=1);

/**
 * The quote cannot be had in time; `reason` says why, so the lab can tell our own refusals
 * (funnel_full, budget, deadline, circuit) from giving up on the upstream (upstream).
 */
final class QuoteUnavailable extends RuntimeException
{
    public function __construct(public readonly string $reason, string $message = '', ?Throwable $previous = null)
    {
        parent::__construct($message !== '' ? $message : $reason, 0, $previous);
    }
}
