<?php

namespace Resilient\Laravel\Queue;

use Closure;
use Illuminate\Queue\InteractsWithQueue;
use Illuminate\Queue\Jobs\SyncJob;
use LogicException;

/**
 * Puts a job back on its queue, saying plainly when the job cannot be released.
 *
 * Only a queue can take a job back. On the `sync` queue (`dispatchSync()`, `QUEUE_CONNECTION=sync`)
 * release() puts it nowhere, and a job object run by hand has no queue job at all: there the
 * refusal is thrown to the caller instead, or the job would count as processed without its work.
 * A job that already failed, deleted itself or released itself is left so, as Laravel's worker
 * leaves it, and the refusal thrown as if no middleware were there (released again, a failed
 * job ran again, and a released one was queued twice).
 */
final class Released
{
    /** @param Closure(): \Throwable $refusal what is thrown when nothing can take the job back */
    public static function job(object $job, int $seconds, Closure $refusal): void
    {
        if (! method_exists($job, 'release')) {
            throw new LogicException(sprintf(
                'resilient: %s cannot be released back to the queue: use Illuminate\Queue\InteractsWithQueue in the job',
                get_class($job),
            ));
        }
        // InteractsWithQueue hands release() to the queue job it holds (`$job->job`); a job with a
        // release() of its own is taken at its word.
        $queued = in_array(InteractsWithQueue::class, class_uses_recursive($job), true);
        if ($queued && (! self::onAQueue($job->job) || self::settled($job->job))) {
            throw $refusal();
        }
        // Laravel's redis and database queues count a release from the start of the current
        // second (`Carbon::now()->addRealSeconds($delay)->getTimestamp()`): a delay of 5 given
        // at 52.35 s made the job ready at 57.0 s, 4.65 s later, before the Retry-After it
        // obeyed. A second more keeps every "no sooner than" (SQS and beanstalkd, which count
        // from now, keep the job a second longer).
        $job->release($queued ? $seconds + 1 : $seconds);
    }

    /** Whether the queue job $queued already failed, or was deleted or released. */
    private static function settled(object $queued): bool
    {
        return (method_exists($queued, 'hasFailed') && $queued->hasFailed())
            || (method_exists($queued, 'isDeletedOrReleased') && $queued->isDeletedOrReleased());
    }

    /** Whether $queued (an InteractsWithQueue job's `$job`) is a queue job that can take it back. */
    private static function onAQueue(mixed $queued): bool
    {
        return is_object($queued) && method_exists($queued, 'release') && ! $queued instanceof SyncJob;
    }
}
