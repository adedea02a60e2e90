<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Client;
use Resilient\Funnel;
use Resilient\RetryBudget;

/**
 * One owner per rule. The same mistake gives the same exception class and the same
 * words through `new Funnel(...)` / `new RetryBudget(...)` and through the client's `funnel` /
 * `budget` options (the option path in front); types follow PHP's coercive mode.
 */
final class OptionTypesTest extends HttpTestCase
{
    /** @return array<string, array{callable, string, mixed}> direct call, option section, option array */
    public static function sameMistakes(): array
    {
        return [
            'limit 0' => [fn () => new Funnel('ot-f', 0), 'funnel', ['limit' => 0]],
            'limit 65' => [fn () => new Funnel('ot-f', 65), 'funnel', ['limit' => 65]],
            'negative limit' => [fn () => new Funnel('ot-f', -3), 'funnel', ['limit' => -3]],
            'reserve = limit' => [fn () => new Funnel('ot-f', 4, 4), 'funnel', ['limit' => 4, 'reserve' => 4]],
            'negative lease' => [fn () => new Funnel('ot-f', 4, 0, -1.0), 'funnel', ['limit' => 4, 'lease' => -1.0]],
            'NAN lease' => [fn () => new Funnel('ot-f', 4, 0, NAN), 'funnel', ['limit' => 4, 'lease' => NAN]],
            'share without reserve' => [fn () => new Funnel('ot-f', 4, 0, null, true), 'funnel', ['limit' => 4, 'share' => true]],
            'negative ratio' => [fn () => new RetryBudget('ot-b', -0.5), 'budget', ['ratio' => -0.5]],
            'negative floor' => [fn () => new RetryBudget('ot-b', 0.1, -1), 'budget', ['floor' => -1]],
            'zero window' => [fn () => new RetryBudget('ot-b', 0.1, 5, 0.0), 'budget', ['window' => 0]],
            'tiny window' => [fn () => new RetryBudget('ot-b', 0.1, 5, 0.001), 'budget', ['window' => 0.001]],
        ];
    }

    /** @dataProvider sameMistakes */
    public function testTheSameValueMistakeReadsTheSameThroughBothPaths(callable $direct, string $section, array $option): void
    {
        $a = self::thrown($direct);
        $b = self::thrown(fn () => new Client('ot-c', [$section => $option]));
        $this->assertInstanceOf(\ValueError::class, $a);
        $this->assertSame(get_class($a), get_class($b));
        // `limit: must be between 1 and 64, got 0` ↔ `option 'funnel.limit': must be ... got 0`.
        [$argument, $problem] = explode(': ', $a->getMessage(), 2);
        $this->assertSame("option '$section.$argument': $problem", $b->getMessage());
    }

    /** @return array<string, array{mixed, string}> */
    public static function wrongTypes(): array
    {
        return [
            'abc' => ['abc', 'string'],
            'array' => [[], 'array'],
            'bool' => [true, 'bool'],
            'object' => [new \stdClass(), 'stdClass'],
        ];
    }

    /** @dataProvider wrongTypes */
    public function testAWrongTypeIsATypeErrorInPhpsWordsThroughBothPaths(mixed $limit, string $given): void
    {
        $a = self::thrown(fn () => new Funnel('ot-f', $limit));
        $b = self::thrown(fn () => new Client('ot-c', ['funnel' => ['limit' => $limit]]));
        $this->assertInstanceOf(\TypeError::class, $a);
        $this->assertInstanceOf(\TypeError::class, $b);
        $this->assertStringEndsWith("must be of type int, $given given", $a->getMessage());
        $this->assertSame("option 'funnel.limit' must be of type int or 'auto', $given given", $b->getMessage());
        $c = self::thrown(fn () => new Client('ot-c', ['timeout' => $limit]));
        $this->assertInstanceOf(\TypeError::class, $c);
        $this->assertSame("option 'timeout' must be of type float, $given given", $c->getMessage());
    }

    public function testNumericStringsAndIntegralFloatsAreAcceptedAsPhpWould(): void
    {
        $this->assertSame(4, (new Funnel('ot-f4', '4'))->limit());
        $this->assertSame(4, (new Funnel('ot-f4', 4.0))->limit());

        // A config read from .env: every number a string. The values take effect.
        $key = $this->up->key('optypes');
        $this->up->script($key, [['status' => 503]]);
        $client = $this->client($key, [
            'timeout' => '0.5',
            'connect_timeout' => '0.25',
            'max_attempts' => '4',
            'backoff' => ['base' => '0.001', 'cap' => 0.002],
            'retry_on' => ['503'],
            'funnel' => ['limit' => '4', 'reserve' => 1.0, 'wait' => '0'],
            'budget' => ['ratio' => '0.5', 'floor' => '10', 'window' => '60'],
        ]);
        try {
            $client->get('/x');
            $this->fail('expected UpstreamFailed');
        } catch (\Resilient\UpstreamFailed $e) {
            $this->assertStringContainsString("(4 attempts in", $e->getMessage());
        }
        $this->assertCount(4, $this->up->attempts($key, 4));
    }

    public function testAnUnknownKeyIsAValueErrorNamingIt(): void
    {
        $e = self::thrown(fn () => new Client('ot-c', ['funnel' => ['limit' => 4, 'limt' => 5]]));
        $this->assertInstanceOf(\ValueError::class, $e);
        $this->assertStringStartsWith("option 'funnel.limt': unknown option (known: limit, reserve, lease, wait, share, min, max, initial)", $e->getMessage());
    }

    private static function thrown(callable $f): \Throwable
    {
        try {
            $f();
        } catch (\Throwable $e) {
            return $e;
        }
        self::fail('expected an exception');
    }
}
