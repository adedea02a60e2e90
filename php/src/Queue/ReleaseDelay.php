<?php

namespace Resilient\Laravel\Queue;

use Illuminate\Container\Container;
use InvalidArgumentException;

/**
 * How long a released job waits before a worker takes it again: a whole number of seconds drawn
 * uniformly from [min, max], so jobs refused together do not come back together (seed 000: a
 * fixed delay brings the whole batch back at the same second).
 *
 * The range comes from the constructor, else `resilient.queue.release_delay` ([min, max]),
 * else [5, 30].
 */
final class ReleaseDelay
{
    public const DEFAULT = [5, 30];

    private function __construct(public readonly int $min, public readonly int $max)
    {
    }

    public static function between(int $min, int $max): self
    {
        if ($min < 0 || $max < $min) {
            throw new InvalidArgumentException("resilient: release delay must be 0 <= min <= max seconds, got [$min, $max]");
        }

        return new self($min, $max);
    }

    /** The configured range (`resilient.queue.release_delay`), or [5, 30]. */
    public static function configured(): self
    {
        $range = self::DEFAULT;
        $app = Container::getInstance();
        if ($app->bound('config')) {
            $range = $app['config']->get('resilient.queue.release_delay', self::DEFAULT);
        }
        if (! is_array($range) || count($range) !== 2) {
            throw new InvalidArgumentException('resilient: resilient.queue.release_delay must be [min, max] in seconds');
        }
        [$min, $max] = array_values($range);

        return self::between((int) $min, (int) $max);
    }

    /** A delay in [min, max] seconds. */
    public function draw(): int
    {
        return random_int($this->min, $this->max);
    }

    /**
     * At least what the upstream asked for (never shortened, as the client itself never
     * shortens a Retry-After), plus up to a tenth more (at least 1 s) so the jobs told the same
     * moment spread out.
     */
    public static function afterRetryAfter(float $seconds): int
    {
        $base = (int) ceil(max(0.0, $seconds));

        return $base + random_int(0, max(1, intdiv($base, 10)));
    }
}
