<?php

declare(strict_types=1);

namespace Resilient\Tests\Harness;

/** What a finished child process left behind. */
final class ProcessResult
{
    public function __construct(
        public readonly int $exitCode,
        public readonly ?int $signal,
        public readonly string $stdout,
        public readonly string $stderr,
        public readonly bool $timedOut,
    ) {
    }

    /** Decode stdout as JSON (the fixtures print one JSON document). */
    public function json(): array
    {
        $data = json_decode(trim($this->stdout), true);
        if (!is_array($data)) {
            throw new \RuntimeException('child did not print JSON: ' . $this->describe());
        }
        return $data;
    }

    /** For assertion messages: everything needed to see why a child misbehaved. */
    public function describe(): string
    {
        return sprintf(
            "exit=%d signal=%s timedOut=%s\n--- stdout\n%s\n--- stderr\n%s",
            $this->exitCode,
            $this->signal === null ? '-' : (string) $this->signal,
            $this->timedOut ? 'yes' : 'no',
            substr($this->stdout, 0, 4000),
            substr($this->stderr, 0, 4000),
        );
    }
}
