<?php

namespace Resilient\Laravel\Testing;

use Closure;
use PHPUnit\Framework\Assert as PHPUnit;
use Resilient\Laravel\Events\AttemptMade;
use Resilient\Laravel\ExtensionCheck;
use Resilient\Response;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * The state of `Resilient::fake()`: each name's script, every call recorded with its outcome,
 * and whether a call nothing answers may reach the real client.
 *
 * A script is a list answered in order (a `Resilient\Response` is returned, a `\Throwable`
 * thrown), a single answer repeated, or a closure `fn (RecordedRequest $r) => Response|Throwable`.
 * A call to an unscripted name goes to the real client, as Laravel's `Http::fake()` lets an
 * unmatched URL through, unless `preventStrayRequests()` is on: then it throws `StrayRequest`.
 * A call past the end of a list throws it always, as Laravel's `Http::sequence()` at its end.
 */
final class FakeClients
{
    /** @var array<string, list<mixed>|Closure|Response|\Throwable> */
    private array $scripts = [];

    /** @var array<string, int> calls answered from each list so far */
    private array $used = [];

    /** fake() without scripts: every configured name answers 200 with an empty body. */
    private bool $answerAll = false;

    private bool $preventStray = false;

    /** @var list<array{0: RecordedRequest, 1: Response|\Throwable}> */
    private array $recorded = [];

    /** @var array<string, ClientFake> */
    private array $clients = [];

    /** Adds scripts (null: every configured name answers 200). */
    public function script(?array $scripts): self
    {
        if ($scripts === null) {
            $this->answerAll = true;

            return $this;
        }
        foreach ($scripts as $name => $script) {
            $this->scripts[(string) $name] = $script;
            $this->used[(string) $name] = 0;
        }

        return $this;
    }

    /** Whether $name has a script of its own (such a name needs no config entry). */
    public function scripts(string $name): bool
    {
        return array_key_exists($name, $this->scripts);
    }

    public function preventStrayRequests(bool $prevent = true): self
    {
        $this->preventStray = $prevent;

        return $this;
    }

    /**
     * @param Closure(): \Resilient\Client $real
     * @param callable|null $fallback the client's `fallback` option
     */
    public function client(string $name, #[\SensitiveParameter] Closure $real, #[\SensitiveParameter] ?string $baseUrl = null, mixed $fallback = null, #[\SensitiveParameter] ?Closure $config = null): ClientFake
    {
        // One made for another base URL or fallback (the entry changed since: a tenancy
        // bootstrapper's config([...])) is made again, as the real client is.
        $fake = $this->clients[$name] ?? null;
        if ($fake === null || ! $fake->madeFor($baseUrl, $fallback)) {
            $fake = $this->clients[$name] = new ClientFake($name, $this, $real, $baseUrl, $fallback, $config);
        }

        return $fake;
    }

    /**
     * The answer to one call: recorded, then returned or thrown.
     *
     * @param list<int> $retryOn the client's `retry_on`: a scripted response with one of these
     *        statuses is thrown as the `UpstreamFailed` the real client ends such a call with
     * @param Closure(): Response $stray sends the call through the real client
     */
    public function answer(#[\SensitiveParameter] RecordedRequest $request, array $retryOn, #[\SensitiveParameter] Closure $stray): Response
    {
        $answer = $this->next($request);
        if ($answer === null) {
            // A list that ran out throws whatever preventStrayRequests() says, as Laravel's
            // Http::sequence() does at its end: the script counted the calls, and one more (a
            // POST, say) must not reach the real upstream.
            if ($this->preventStray || is_array($this->scripts[$request->client()] ?? null)) {
                throw new StrayRequest($this->strayMessage($request));
            }
            try {
                $answer = $stray();
            } catch (\Throwable $e) {
                $answer = $e;
            }
        } else {
            $answer = self::completed($answer);
            if ($answer instanceof Response && in_array($answer->status(), $retryOn, true)) {
                $answer = self::attemptsRanOut($request, $answer);
            }
            if (! in_array($request->options()['sink'] ?? null, [null, false], true)) {   // null, false: no sink
                $answer = self::intoSink($answer, $request->options()['sink']);
            }
        }
        $this->recorded[] = [$request, $answer];
        if ($answer instanceof \Throwable) {
            throw $answer;
        }

        return $answer;
    }

    /**
     * A scripted `new UpstreamFailed($message, $code)` made as the real client makes one, by
     * its contract (the code is the last attempt's status, 0 a connection error): with a code
     * of 100 to 599 its `response()` is a `Response::fake($code)`, with 0 its `failure()` is
     * `'connect'`. Code that reads them (`Http::resilient()` makes the first a response, the
     * second a `ConnectionException`) then sees what production gives. One made with either
     * set, or another code, is left as it is.
     */
    private static function completed(mixed $answer): mixed
    {
        if (! $answer instanceof UpstreamFailed || $answer->response() !== null || $answer->failure() !== null) {
            return $answer;
        }
        $code = $answer->getCode();
        if ($code === 0) {
            (new \ReflectionProperty(Unavailable::class, 'failure'))->setValue($answer, 'connect');
        } elseif ($code >= 100 && $code <= 599) {
            (new \ReflectionProperty(Unavailable::class, 'response'))->setValue($answer, Response::fake($code));
        }

        return $answer;
    }

    /**
     * What the real client throws when a call's attempts end on a status it retries (every
     * attempt answered so, or its retry refused: a POST without a key): `UpstreamFailed`, its
     * code the status, its `response()` the scripted response. Its message names the call as
     * the real one does (no user-info, no query).
     */
    private static function attemptsRanOut(#[\SensitiveParameter] RecordedRequest $request, Response $response): UpstreamFailed
    {
        $status = $response->status();
        $failed = new UpstreamFailed(sprintf(
            "%s %s: status %d; a scripted answer in the client's retry_on, so the call fails as when its attempts run out on it",
            $request->method(), AttemptMade::safeUrl($request->url()), $status,
        ), $status);
        (new \ReflectionProperty(Unavailable::class, 'response'))->setValue($failed, $response);

        return $failed;
    }

    /** @return list<array{0: RecordedRequest, 1: Response|\Throwable}> the calls $callback accepts (all without one) */
    public function recorded(?callable $callback = null): array
    {
        if ($callback === null) {
            return $this->recorded;
        }
        // A loop, not array_filter(): a trace of an exception $callback throws would hold the
        // recordings as array_filter()'s argument.
        $accepted = [];
        foreach ($this->recorded as $pair) {
            if ($callback($pair[0], $pair[1])) {
                $accepted[] = $pair;
            }
        }

        return $accepted;
    }

    public function assertSent(callable $callback): void
    {
        PHPUnit::assertTrue($this->recorded($callback) !== [], 'An expected call was not made through a faked Resilient client.');
    }

    public function assertNotSent(callable $callback): void
    {
        PHPUnit::assertTrue($this->recorded($callback) === [], 'An unexpected call was made through a faked Resilient client.');
    }

    public function assertSentCount(int $count): void
    {
        PHPUnit::assertCount($count, $this->recorded, sprintf(
            'Expected %d calls through faked Resilient clients, %d were made.', $count, count($this->recorded),
        ));
    }

    /**
     * Fails naming each call (client, method, URL without user-info or query), not with
     * PHPUnit's diff of the recordings, which would print every header, body and URL they hold.
     */
    public function assertNothingSent(): void
    {
        PHPUnit::assertTrue($this->recorded === [], $this->madeCalls());
    }

    /** The calls made, each as its client, method and URL without user-info or query, for a failure message. */
    private function madeCalls(): string
    {
        $lines = [sprintf('%d call%s made through faked Resilient clients:', count($this->recorded), count($this->recorded) === 1 ? ' was' : 's were')];
        foreach ($this->recorded as [$request]) {
            $lines[] = sprintf('- "%s": %s %s', $request->client(), $request->method(), AttemptMade::safeUrl($request->url()));
        }

        return implode("\n", $lines);
    }

    /** The scripted answer to $request, or null when nothing answers it. */
    private function next(#[\SensitiveParameter] RecordedRequest $request): Response|\Throwable|null
    {
        $name = $request->client();
        if (array_key_exists($name, $this->scripts)) {
            $script = $this->scripts[$name];
            if ($script instanceof Closure) {
                try {
                    $answer = $script($request);
                } catch (Unavailable $e) {
                    $answer = $e;   // thrown rather than returned: the same answer, recorded
                }

                return $this->checked($answer, $name);
            }
            if (! is_array($script)) {
                return $this->checked($script, $name);
            }
            $i = $this->used[$name]++;
            if ($i < count($script)) {
                return $this->checked(array_values($script)[$i], $name);
            }
        }

        if (! $this->answerAll) {
            return null;
        }
        // Resilient\Response is the extension's class: without it, how to install it.
        if (! class_exists(Response::class)) {
            throw new \RuntimeException((string) ExtensionCheck::problem());
        }

        return Response::fake(200);
    }

    /**
     * A scripted answer to a call with a `sink`, delivered as the real client delivers it: the
     * body written to the sink (a path or a stream), `body()` then ''. A refusal's last response
     * (retryable statuses exhausted) is written there too, as the real client wrote it.
     */
    private static function intoSink(Response|\Throwable $answer, #[\SensitiveParameter] mixed $sink): Response|\Throwable
    {
        $response = $answer instanceof Unavailable ? $answer->response() : $answer;
        if (! $response instanceof Response) {
            return $answer;
        }
        $body = (string) $response->body();
        if (is_resource($sink)) {
            fwrite($sink, $body);
        } else {
            file_put_contents((string) $sink, $body);
        }

        return $answer instanceof Response ? Response::fake($answer->status(), '', $answer->headers()) : $answer;
    }

    private function checked(mixed $answer, string $name): Response|\Throwable
    {
        if ($answer instanceof Response || $answer instanceof \Throwable) {
            return $answer;
        }

        throw new \InvalidArgumentException(sprintf(
            'resilient: the fake script for "%s" must give a Resilient\Response (Response::fake(...)) or a \Throwable, got %s',
            $name,
            get_debug_type($answer),
        ));
    }

    private function strayMessage(#[\SensitiveParameter] RecordedRequest $request): string
    {
        $what = sprintf('%s %s', $request->method(), AttemptMade::safeUrl($request->url()));
        $name = $request->client();
        if (! array_key_exists($name, $this->scripts)) {
            return sprintf('resilient: stray call to "%s" (%s): no script for this name in Resilient::fake() and stray requests are prevented', $name, $what);
        }

        return sprintf(
            'resilient: stray call to "%s" (%s): its script in Resilient::fake() has %d answer(s) and all were used '
            . '(a list of answers ends as Laravel\'s Http::sequence() does; a closure answers every call)',
            $name, $what, is_array($this->scripts[$name]) ? count($this->scripts[$name]) : 1,
        );
    }
}
