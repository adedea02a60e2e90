<?php

namespace Resilient\Laravel\Events;

use Illuminate\Contracts\Events\Dispatcher;
use Psr\Log\LoggerInterface;

/**
 * The `on_attempt` callable the manager gives every client it builds: dispatches
 * `AttemptMade` and, when `resilient.log_channel` is set, writes one log line per attempt.
 *
 * It lives here, not in config/resilient.php, because a closure in config breaks
 * `php artisan config:cache` (var_export cannot write one).
 */
final class AttemptReporter
{
    /**
     * @param (\Closure(): Dispatcher)|null $events resolved at each attempt (so Event::fake() sees them)
     * @param (\Closure(): LoggerInterface)|null $logger resolved on the first attempt
     * @param callable|null $also an `on_attempt` callable from config, called after
     */
    public function __construct(
        private ?\Closure $events,
        private ?\Closure $logger,
        private $also = null,
    ) {
    }

    public function __invoke(array $record): void
    {
        $attempt = AttemptMade::fromRecord($record);
        if ($this->events !== null) {
            ($this->events)()->dispatch($attempt);
        }
        if ($this->logger !== null) {
            $failed = $attempt->error !== null || $attempt->retryFollows || $attempt->givesUp
                || ($attempt->status ?? 0) >= 500;
            $line = sprintf(
                'resilient %s attempt %d: %s %s -> %s',
                $attempt->client,
                $attempt->attempt,
                $attempt->method,
                $attempt->url,
                $attempt->status ?? $attempt->error ?? 'no answer',
            );
            ($this->logger)()->log($failed ? 'warning' : 'info', $line, $attempt->toArray());
        }
        if ($this->also !== null) {
            ($this->also)($record);
        }
    }

    /** True when there is nothing to do (no events, no log, nothing from config). */
    public function isIdle(): bool
    {
        return $this->events === null && $this->logger === null && $this->also === null;
    }
}
