<?php

namespace Resilient\Laravel\Console\Check;

/** One violation resilient:check reports: which rule, which job, what is wrong and by how much. */
final class Finding
{
    public const NESTING = 'nesting';
    public const TWO_LAYERS = 'retries in two layers';
    public const FIXED_BACKOFF = 'fixed backoff';
    public const UNKNOWN_CLIENT = 'unknown client';
    public const JOB_FUNNEL = 'job funnel';
    public const RELEASED_WITHOUT_TRIES = 'released without tries';
    public const NOT_RELEASABLE = 'cannot be released';

    public function __construct(
        public readonly string $rule,
        public readonly string $job,
        public readonly string $message,
    ) {
    }

    public function toArray(): array
    {
        return ['rule' => $this->rule, 'job' => $this->job, 'message' => $this->message];
    }
}
