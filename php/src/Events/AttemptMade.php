<?php

namespace Resilient\Laravel\Events;

use Resilient\Laravel\GivenText;

/**
 * One attempt of a `Resilient\Client` call, dispatched while the call is in progress (after
 * the attempt, before any sleep), so a listener sees retries as they happen.
 *
 * Carries what the extension's `on_attempt` reports and nothing more: the URL without its
 * query and without user info, never a header (Authorization, cookies and tokens stay out).
 */
final class AttemptMade
{
    public function __construct(
        /** The client's name (its funnel and budget). */
        public readonly string $client,
        public readonly string $method,
        /** scheme://host[:port]/path: no query, no user info. */
        public readonly string $url,
        /** 1 for the first attempt. */
        public readonly int $attempt,
        /** The upstream's status, or null when no answer came. */
        public readonly ?int $status,
        /** Why no answer came (`timeout`, `connect`, ...), or null. */
        public readonly ?string $error,
        public readonly float $durationMs,
        /** Whether another attempt follows this one. */
        public readonly bool $retryFollows,
        /** Whether the call fails after this attempt (it throws), whatever the attempt got. */
        public readonly bool $givesUp,
        /** The decision's reason (e.g. why no retry follows), or null. */
        public readonly ?string $reason,
    ) {
    }

    /** From the array the extension passes to `on_attempt`. */
    public static function fromRecord(#[\SensitiveParameter] array $a): self
    {
        return new self(
            (string) ($a['client'] ?? ''),
            (string) ($a['method'] ?? ''),
            self::safeUrl((string) ($a['url'] ?? '')),
            (int) ($a['attempt'] ?? 0),
            isset($a['status']) ? (int) $a['status'] : null,
            isset($a['error']) ? (string) $a['error'] : null,
            (float) ($a['duration_ms'] ?? 0.0),
            (bool) ($a['retry_follows'] ?? false),
            (bool) ($a['gives_up'] ?? false),
            isset($a['reason']) ? (string) $a['reason'] : null,
        );
    }

    /** The fields as a log context. */
    public function toArray(): array
    {
        return [
            'client' => $this->client,
            'method' => $this->method,
            'url' => $this->url,
            'attempt' => $this->attempt,
            'status' => $this->status,
            'error' => $this->error,
            'duration_ms' => $this->durationMs,
            'retry_follows' => $this->retryFollows,
            'gives_up' => $this->givesUp,
            'reason' => $this->reason,
        ];
    }

    /**
     * The URL as it may be shown (logs, events, test failures): trimmed as the client reads it
     * (Unicode whitespace), without the query, the fragment and any user:password it may carry,
     * wherever a `scheme://user:password@` appears (also inside a path). The host is the one the
     * client reads (the URL standard's): the authority ends at the first '/', '\', '?' or '#',
     * its user-info at its last '@'.
     */
    public static function safeUrl(#[\SensitiveParameter] string $url): string
    {
        $url = preg_replace_callback(
            '#([a-z][a-z0-9+.-]*://)([^/\\\\?\#]*)#i',
            static fn (array $m): string => $m[1] . self::shownHost($m[2]),
            GivenText::trimmed($url),
        );

        return preg_replace('/[?#].*$/s', '', $url);
    }

    /**
     * An authority without its user-info. One that is no host and port (`user:pa/ss@h`, a
     * password holding a raw '/', '?' or '#' the client cannot read as one) is hidden whole,
     * and so is the rest of the URL: what follows may be the rest of that password.
     */
    private static function shownHost(#[\SensitiveParameter] string $authority): string
    {
        $at = strrpos($authority, '@');
        $host = $at === false ? $authority : substr($authority, $at + 1);

        return preg_match('/^(\[[^\]]*\]|[^:\[\]]*)(:\d*)?$/', $host) === 1 ? $host : '[hidden]?';
    }
}
