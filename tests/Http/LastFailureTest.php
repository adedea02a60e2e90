<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\DeadlineExceeded;
use Resilient\Tests\Harness\Run;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * `Unavailable::failure()`: why the last attempt got no answer ('timeout', 'connect',
 * 'closed'...), so a caller tells a timeout from a refused connection without reading the
 * message. Null when the last attempt got an answer (then `getCode()` and `response()` say which)
 * or none was sent.
 */
final class LastFailureTest extends HttpTestCase
{
    private const FAST = ['backoff' => ['base' => 0.001, 'cap' => 0.002]];

    public function testARefusedConnectionSaysConnect(): void
    {
        $client = new \Resilient\Client(Run::name('http'), ['base_url' => 'http://127.0.0.1:' . Run::freePort(), 'max_attempts' => 2] + self::FAST);
        $e = $this->failing(fn () => $client->get('/x'), UpstreamFailed::class);
        $this->assertSame('connect', $e->failure());
        $this->assertSame(0, $e->getCode());
        $this->assertNull($e->response());
    }

    /**
     * A connect that timed out (a listener whose accept queue is full drops the SYN) is a
     * 'connect' failure on both transports (`verify => false` sends through reqwest), as
     * documented, not a 'timeout' (the metrics count it as a connection failure too).
     */
    public function testAConnectTimeoutSaysConnectOnEitherTransport(): void
    {
        $server = stream_socket_server('tcp://127.0.0.1:0', $errno, $error, STREAM_SERVER_BIND | STREAM_SERVER_LISTEN, stream_context_create(['socket' => ['backlog' => 0]]));
        $address = stream_socket_get_name($server, false);
        $queued = [];
        for ($i = 0; $i < 4; $i++) {
            $queued[] = @stream_socket_client("tcp://$address", $errno, $error, 0.2, STREAM_CLIENT_CONNECT | STREAM_CLIENT_ASYNC_CONNECT);
        }
        $client = new \Resilient\Client(Run::name('http'), ['base_url' => "http://$address", 'connect_timeout' => 0.3, 'timeout' => 3.0, 'max_attempts' => 1]);
        foreach (['plain' => [], 'reqwest' => ['verify' => false]] as $transport => $options) {
            $started = hrtime(true);
            $e = $this->failing(fn () => $client->get('/x', [], $options), UpstreamFailed::class);
            $this->assertSame('connect', $e->failure(), $transport . ': ' . $e->getMessage());
            $this->assertLessThan(2.5, (hrtime(true) - $started) / 1e9, "$transport: cut by the connect timeout, not the attempt's");
        }
    }

    public function testATimeoutSaysTimeoutAndTheUpstreamSawTheAttempt(): void
    {
        $key = $this->up->key('lastfail-timeout');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 2000]]);
        $e = $this->failing(fn () => $this->client($key, ['timeout' => 0.2, 'max_attempts' => 1])->get('/x'), UpstreamFailed::class);
        $this->assertSame('timeout', $e->failure());
        $this->assertSame(0, $e->getCode());
        $this->assertCount(1, $this->up->attempts($key, 1));
    }

    public function testAConnectionClosedWithoutAnAnswerSaysClosed(): void
    {
        $key = $this->up->key('lastfail-closed');
        $this->up->script($key, [['status' => 200, 'close' => true], ['status' => 200, 'close' => true]]);
        $e = $this->failing(fn () => $this->client($key, ['max_attempts' => 2] + self::FAST)->get('/x'), UpstreamFailed::class);
        $this->assertSame('closed', $e->failure());
        $this->assertCount(2, $this->up->attempts($key, 2));
    }

    public function testTheLastAttemptDecidesAndAnAnswerHasNoFailure(): void
    {
        // A timeout first, then a 503: the 503 is the last attempt's outcome.
        $key = $this->up->key('lastfail-answer');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 2000], ['status' => 503]]);
        $e = $this->failing(fn () => $this->client($key, ['timeout' => 0.2, 'max_attempts' => 2] + self::FAST)->get('/x'), UpstreamFailed::class);
        $this->assertNull($e->failure());
        $this->assertSame(503, $e->getCode());
        $this->assertSame(503, $e->response()->status());
        $this->assertCount(2, $this->up->attempts($key, 2));
    }

    public function testAnAttemptCutByTheDeadlineSaysTimeout(): void
    {
        $key = $this->up->key('lastfail-deadline');
        $this->up->script($key, [['status' => 200, 'delay_ms' => 2000]]);
        $e = $this->failing(fn () => $this->client($key, ['deadline' => 0.2, 'timeout' => 5.0])->get('/x'), DeadlineExceeded::class);
        $this->assertSame('timeout', $e->failure());
    }

    public function testAPoolResultCarriesItToo(): void
    {
        $key = $this->up->key('lastfail-pool');
        $this->up->script($key, [['status' => 200, 'close' => true]]);
        $results = $this->client($key, ['max_attempts' => 1])->pool(['a' => ['GET', '/a']]);
        $this->assertInstanceOf(UpstreamFailed::class, $results['a']);
        $this->assertSame('closed', $results['a']->failure());
    }

    public function testAnExceptionMadeInPhpHasNoneAndASubclassMaySetIt(): void
    {
        $this->assertNull((new UpstreamFailed('by hand'))->failure());
        $mine = new class ('mine') extends Unavailable {
            public function __construct(string $message)
            {
                parent::__construct($message);
                $this->failure = 'timeout';
            }
        };
        $this->assertSame('timeout', $mine->failure());
        $odd = new class ('odd') extends Unavailable {
            public function __construct(string $message)
            {
                parent::__construct($message);
                $this->failure = 42;
            }
        };
        $this->assertNull($odd->failure(), 'only a string is a failure kind');
        $notAResponse = new class ('odd') extends Unavailable {
            public function __construct(string $message)
            {
                parent::__construct($message);
                $this->response = new \ArrayObject();
            }
        };
        $this->assertNull($notAResponse->response(), 'response() is declared ?Resilient\Response: anything else reads as none');
    }

    /**
     * @template T of Unavailable
     * @param class-string<T> $class
     * @return T
     */
    private function failing(callable $call, string $class): Unavailable
    {
        try {
            $call();
        } catch (Unavailable $e) {
            $this->assertInstanceOf($class, $e, $e->getMessage());
            return $e;
        }
        $this->fail("expected $class");
    }
}
