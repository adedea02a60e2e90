<?php

namespace Resilient\Laravel\Queue;

use LogicException;

/** Puts a job back on its queue, saying plainly when the job cannot be released. */
final class Released
{
    public static function job(object $job, int $seconds): void
    {
        if (! method_exists($job, 'release')) {
            throw new LogicException(sprintf(
                'resilient: %s cannot be released back to the queue: use Illuminate\Queue\InteractsWithQueue in the job',
                get_class($job),
            ));
        }
        $job->release($seconds);
    }
}
