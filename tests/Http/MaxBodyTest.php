<?php

declare(strict_types=1);

namespace Resilient\Tests\Http;

require_once __DIR__ . '/support/HttpTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\UpstreamFailed;

/**
 * Response bodies are bounded by `max_body`, enforced while reading. A 300 MB
 * body (announced or chunked) and an endless chunked body end with the max_body error (an
 * UpstreamFailed naming the limit, never retried), in `request` and in `pool`; the process's
 * peak RSS stays under 3 × max_body above its baseline (read from /proc); `max_body` is lowered
 * to what `memory_limit` leaves, so an FPM worker with memory_limit=64M survives a 300 MB body.
 */
final class MaxBodyTest extends HttpTestCase
{
    private const BIG = 300_000_000;

    /** The stdout of `$code` run under memory_limit 48 MiB, which must exit normally. */
    private function stdoutUnder48M(string $code): string
    {
        $r = PhpProcess::runCode($code, ['memory_limit' => '48M'], 60.0);
        $this->assertSame(0, $r->exitCode, $r->describe());

        return $r->stdout;
    }

    private function bigKey(): string
    {
        $key = $this->up->key('maxbody');
        $this->up->script($key, [['stream' => ['bytes' => self::BIG]]], 'repeat_last', '/announced');
        $this->up->script($key, [['stream' => ['bytes' => self::BIG, 'chunked' => true]]], 'repeat_last', '/chunked');
        $this->up->script($key, [['stream' => new \stdClass()]], 'repeat_last', '/endless');
        $this->up->script($key, [['stream' => ['bytes' => 1_000_000]]], 'repeat_last', '/small');
        return $key;
    }

    public function testBigAndEndlessBodiesEndWithTheMaxBodyErrorAndRssStaysBounded(): void
    {
        $key = $this->bigKey();
        $base = $this->up->base($key);
        $max = 8 * 1024 * 1024;
        $code = <<<PHP
            function rss(string \$field): int {
                preg_match('/^' . \$field . ':\\s+(\\d+) kB/m', file_get_contents('/proc/self/status'), \$m);
                return (int) \$m[1] * 1024;
            }
            \$c = new Resilient\\Client('maxbody', ['base_url' => '$base', 'max_body' => $max, 'timeout' => 20]);
            \$out = ['small' => strlen(\$c->get('/small')->body())];
            \$baseline = rss('VmRSS');
            foreach (['announced', 'chunked', 'endless'] as \$p) {
                \$t = hrtime(true);
                try {
                    \$c->get("/\$p");
                    \$out[\$p] = 'no error';
                } catch (Resilient\\UpstreamFailed \$e) {
                    \$out[\$p] = \$e->getMessage();
                }
                \$out["\$p.ms"] = (hrtime(true) - \$t) / 1e6;
            }
            \$out['peak_single'] = rss('VmHWM');
            foreach (\$c->pool(['c' => ['GET', '/chunked'], 'e' => ['GET', '/endless'], 's' => ['GET', '/small']], 3) as \$k => \$r) {
                \$out["pool.\$k"] = \$r instanceof Resilient\\Response ? strlen(\$r->body()) : get_class(\$r) . ': ' . \$r->getMessage();
            }
            \$out['baseline'] = \$baseline;
            \$out['peak'] = rss('VmHWM');
            echo json_encode(\$out);
            PHP;
        $r = PhpProcess::code($code)->wait(60.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        $out = $r->json();
        $this->assertSame(1_000_000, $out['small']);
        foreach (['announced', 'chunked', 'endless'] as $p) {
            $this->assertStringContainsString("max_body ($max bytes)", $out[$p], $p);
            $this->assertStringContainsString('too_large error; not retried', $out[$p], $p);
            $this->assertLessThan(10_000, $out["$p.ms"], "$p ended by the limit, not by the 20 s timeout");
        }
        $this->assertStringContainsString('announced 300000000 bytes', $out['announced'], 'refused from Content-Length, nothing read');
        $this->assertStringStartsWith(UpstreamFailed::class . ': ', $out['pool.c']);
        $this->assertStringContainsString("max_body ($max bytes)", $out['pool.c']);
        $this->assertStringContainsString("max_body ($max bytes)", $out['pool.e']);
        $this->assertSame(1_000_000, $out['pool.s']);
        $grew = $out['peak_single'] - $out['baseline'];
        $this->assertLessThan(3 * $max, $grew, sprintf('peak RSS grew by %.1f MB', $grew / 1e6));
        // A pool holds up to one body per request in flight: two big ones here.
        $grew = $out['peak'] - $out['baseline'];
        $this->assertLessThan(2 * 3 * $max, $grew, sprintf('pool: peak RSS grew by %.1f MB', $grew / 1e6));
        // Not retried: one attempt per call at the upstream.
        $rows = $this->up->attempts($key, 8);
        $paths = array_count_values(array_column($rows, 'path'));
        ksort($paths);
        $this->assertSame(['/announced' => 1, '/chunked' => 2, '/endless' => 2, '/small' => 2], $paths);
        // Reading stopped and the connection was closed: the upstream saw the client leave.
        foreach ($rows as $row) {
            if ($row['path'] !== '/small') {
                $this->assertSame('abandoned', $row['outcome'], $row['path']);
            }
        }
    }

    /**
     * The bodies of the responses a script keeps are Rust memory `memory_limit` does not see:
     * they count against the next call's limit, and stop counting when the objects go.
     * memory_limit 48 MiB, 15 MB bodies: three kept leave less than 15 MB for a fourth.
     */
    public function testResponsesAScriptKeepsCountAgainstTheNextCallsLimit(): void
    {
        $key = $this->up->key('maxbody-held');
        $this->up->script($key, [['stream' => ['bytes' => 15_000_000]]], 'repeat_last');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-held', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 1]);
            \$kept = [];
            \$out = [];
            for (\$i = 0; \$i < 4; \$i++) {
                try {
                    \$kept[] = \$c->get('/big');
                    \$out[] = 'ok';
                } catch (Resilient\\UpstreamFailed \$e) {
                    \$out[] = \$e->failure();
                }
            }
            \$kept = [];
            \$out[] = strlen(\$c->get('/big')->body()) === 15_000_000 ? 'ok after' : 'short';
            echo implode(',', \$out);
            PHP;
        $this->assertSame('ok,ok,ok,too_large,ok after', $this->stdoutUnder48M($code));
    }

    /**
     * A pool's bodies are all held at once until it returns: together they stay within what
     * `memory_limit` leaves, as one call's body does. memory_limit 48 MiB, four 15 MB bodies in
     * flight together (and one after the other): three are kept, the fourth is `too_large`,
     * and nothing is left counted once the pool's responses are gone.
     */
    public function testAPoolsBodiesTogetherStayWithinWhatMemoryLimitLeaves(): void
    {
        $key = $this->up->key('maxbody-pool');
        $this->up->script($key, [['stream' => ['bytes' => 15_000_000]]], 'repeat_last');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-pool', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 1]);
            \$out = [];
            foreach ([4, 1] as \$concurrency) {
                \$results = \$c->pool(array_fill(0, 4, ['GET', '/big']), \$concurrency);
                \$tally = [];
                foreach (\$results as \$r) {
                    \$k = \$r instanceof Resilient\\Response ? 'ok' : \$r->failure();
                    \$tally[\$k] = (\$tally[\$k] ?? 0) + 1;
                }
                ksort(\$tally);
                \$out[] = json_encode(\$tally);
                \$results = \$r = null;
            }
            \$out[] = strlen(\$c->get('/big')->body()) === 15_000_000 ? 'ok after' : 'short';
            echo implode(' ', \$out);
            PHP;
        $this->assertSame('{"ok":3,"too_large":1} {"ok":3,"too_large":1} ok after', $this->stdoutUnder48M($code));
    }

    /**
     * A body the client accepts fits as a PHP string when `body()` is called: PHP checks
     * `memory_limit` against the memory it took from the system (whole chunks and pages), not
     * against what its allocator handed out. Bodies just under 48 MiB, one at a time: each is
     * either read whole or refused as `too_large`, never a fatal "Allowed memory size
     * exhausted"; and one of 40 MiB, well inside, is read (`max_body` raised above its 32 MiB
     * default, so only `memory_limit` bounds them).
     */
    public function testABodyTheClientAcceptsFitsWhenRead(): void
    {
        $key = $this->up->key('maxbody-edge');
        $sizes = [40 << 20, 46 << 20, (46 << 20) + (1 << 19), 47 << 20, (47 << 20) + (1 << 18)];
        foreach ($sizes as $i => $bytes) {
            $this->up->script($key, [['stream' => ['bytes' => $bytes]]], 'repeat_last', "/b$i");
        }
        $base = $this->up->base($key);
        $list = implode(',', $sizes);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-edge', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 1, 'max_body' => 1 << 30]);
            \$out = [];
            foreach ([$list] as \$i => \$bytes) {
                try {
                    \$out[] = strlen(\$c->get("/b\$i")->body()) === \$bytes ? 'read' : 'short';
                } catch (Resilient\\UpstreamFailed \$e) {
                    \$out[] = \$e->failure();
                }
            }
            echo implode(',', \$out);
            PHP;
        $out = explode(',', $this->stdoutUnder48M($code));
        $this->assertSame('read', $out[0]);
        foreach ($out as $o) {
            $this->assertContains($o, ['read', 'too_large']);
        }
    }

    /**
     * Responses a script keeps, each of whose bodies it then reads and keeps too: the client
     * counted each kept body as the PHP string it becomes (pages included), so every string
     * fits. memory_limit 48 MiB, bodies of 9.4 MiB: four fit, the fifth is refused.
     */
    public function testKeptResponsesBodiesAllFitWhenRead(): void
    {
        $key = $this->up->key('maxbody-kept');
        $this->up->script($key, [['stream' => ['bytes' => 9_856_000]]], 'repeat_last');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-kept', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 1]);
            \$kept = [];
            \$out = [];
            for (\$i = 0; \$i < 5; \$i++) {
                try {
                    \$kept[] = \$c->get('/big');
                    \$out[] = 'ok';
                } catch (Resilient\\UpstreamFailed \$e) {
                    \$out[] = \$e->failure();
                }
            }
            \$strings = [];
            foreach (\$kept as \$r) {
                \$strings[] = \$r->body();
            }
            echo implode(',', \$out), ' ', count(\$strings);
            PHP;
        $this->assertSame('ok,ok,ok,ok,too_large 4', $this->stdoutUnder48M($code));
    }

    /**
     * Bodies of 1.1 MiB become strings that never share one of PHP's 2 MiB chunks: kept and read,
     * each takes a whole chunk against `memory_limit`, and the client counts them so. Under
     * 48 MiB, forty are asked: about twenty are accepted, the rest `too_large`, and every
     * accepted one's body is read and kept without a fatal error.
     */
    public function testKeptMidSizeBodiesAllFitWhenRead(): void
    {
        $key = $this->up->key('maxbody-mid');
        $this->up->script($key, [['stream' => ['bytes' => 1_153_434]]], 'repeat_last');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-mid', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 1]);
            \$kept = [];
            \$refused = 0;
            for (\$i = 0; \$i < 40; \$i++) {
                try {
                    \$kept[] = \$c->get('/mid');
                } catch (Resilient\\UpstreamFailed \$e) {
                    \$refused += \$e->failure() === 'too_large' ? 1 : 100;
                }
            }
            \$strings = [];
            foreach (\$kept as \$r) {
                \$strings[] = \$r->body();
            }
            echo count(\$kept), ' ', \$refused, ' ', count(\$strings);
            PHP;
        [$kept, $refused, $read] = array_map('intval', explode(' ', $this->stdoutUnder48M($code)));
        $this->assertSame(40, $kept + $refused, 'every refusal is too_large');
        $this->assertGreaterThanOrEqual(15, $kept);
        $this->assertSame($kept, $read);
    }

    /**
     * A body thrown away for a retry stops counting: a 30 MB 503 and then a 30 MB 200 under
     * memory_limit 48 MiB (either alone fits, both would not).
     */
    public function testARetriedAnswersBodyNoLongerCounts(): void
    {
        $key = $this->up->key('maxbody-retried');
        $this->up->script($key, [
            ['status' => 503, 'stream' => ['bytes' => 30_000_000]],
            ['stream' => ['bytes' => 30_000_000]],
        ], 'repeat_last');
        $base = $this->up->base($key);
        $code = <<<PHP
            \$c = new Resilient\\Client('maxbody-retried', ['base_url' => '$base', 'timeout' => 20, 'max_attempts' => 2, 'backoff' => ['base' => 0.001, 'cap' => 0.001]]);
            \$r = \$c->get('/big');
            echo \$r->status(), ' ', strlen(\$r->body()), ' ', \$r->attempts();
            PHP;
        $this->assertSame('200 30000000 2', $this->stdoutUnder48M($code));
    }

    /**
     * A 503 or 429 (`retry_on`) whose body is over max_body is still that answer: its status
     * and Retry-After decide, the body (an outage page) is dropped. Retried as a 503, counted a
     * 5xx for the metrics (and so the breaker); the last one's UpstreamFailed has code 503 and a
     * response without its body. Before, the status was lost: failure 'too_large', not
     * retried, code 0, counted 'other'. A 200 over the limit still fails 'too_large'.
     */
    public function testARetryOnAnswerOverMaxBodyIsStillThatAnswer(): void
    {
        $key = $this->up->key('maxbody-503');
        foreach (['announced' => false, 'chunked' => true] as $path => $chunked) {
            $this->up->script($key, [
                ['status' => 503, 'headers' => ['Retry-After' => '0'], 'stream' => ['bytes' => 5000, 'chunked' => $chunked]],
                ['status' => 200, 'body' => 'ok'],
            ], 'repeat_last', "/$path");
        }
        $this->up->script($key, [['status' => 503, 'stream' => ['bytes' => 5000]]], 'repeat_last', '/down');
        $this->up->script($key, [['status' => 200, 'stream' => ['bytes' => 5000]]], 'repeat_last', '/big');
        $name = Run::name('maxbody-503');
        $client = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key), 'max_body' => 1000, 'max_attempts' => 2, 'budget' => false,
            'backoff' => ['base' => 0.001, 'cap' => 0.001],
        ]);
        foreach (['/announced', '/chunked'] as $path) {
            $r = $client->get($path);
            $this->assertSame([200, 'ok', 2], [$r->status(), $r->body(), $r->attempts()], $path);
        }
        try {
            $client->get('/down');
            $this->fail('the upstream answers 503');
        } catch (UpstreamFailed $e) {
            $this->assertSame(503, $e->getCode(), $e->getMessage());
            $this->assertNull($e->failure(), $e->getMessage());
            $this->assertSame([503, ''], [$e->response()?->status(), $e->response()?->body()]);
        }
        try {
            $client->get('/big');
            $this->fail('a 200 over max_body');
        } catch (UpstreamFailed $e) {
            $this->assertSame('too_large', $e->failure());
            $this->assertSame(0, $e->getCode());
        }
        $this->assertCount(7, $this->up->attempts($key, 7));
        $failures = \Resilient\Metrics::snapshot()[$name]['failures'];
        $this->assertSame([4, 1], [$failures['5xx'], $failures['other']], json_encode($failures)); // the 200's too_large: 'other'
    }

    public function testAnFpmWorkerWithMemoryLimit64MSurvivesA300MbBody(): void
    {
        $key = $this->bigKey();
        $web = new WebRunner(['memory_limit' => '64M'], 1);
        try {
            $spec = fn (string $path, array $options = []) => [
                'name' => Run::name('maxbodyweb'),
                'options' => $options + ['base_url' => $this->up->base($key), 'timeout' => 20],
                'path' => $path,
            ];
            $first = $web->call($spec('/small'));
            $this->assertTrue($first['results'][0]['ok'], json_encode($first['results'][0]));
            $pid = $first['pid'];
            $baseline = self::procField($pid, 'VmRSS');

            // max_body asks for 1 GiB: the client lowers it to what memory_limit leaves.
            $big = $web->call($spec('/chunked', ['max_body' => 1 << 30]));
            $result = $big['results'][0];
            $this->assertFalse($result['ok']);
            $this->assertSame(UpstreamFailed::class, $result['class']);
            // The limit that stopped it is named: what memory_limit leaves, not max_body.
            $this->assertMatchesRegularExpression('/more than memory_limit leaves \((\d+) bytes\)/', $result['message']);
            preg_match('/memory_limit leaves \((\d+) bytes\)/', $result['message'], $m);
            $limit = (int) $m[1];
            $this->assertLessThan(64 * 1024 * 1024, $limit, 'clamped below memory_limit');
            $this->assertSame($pid, $big['pid'], 'the same worker answered');
            $peak = self::procField($pid, 'VmHWM');
            $this->assertLessThan(3 * $limit, $peak - $baseline, sprintf('worker peak grew by %.1f MB', ($peak - $baseline) / 1e6));

            $after = $web->call($spec('/small'));
            $this->assertTrue($after['results'][0]['ok']);
            $this->assertSame($pid, $after['pid'], 'the worker survived');
        } finally {
            $web->stop();
        }
    }

    private static function procField(int $pid, string $field): int
    {
        $status = (string) file_get_contents("/proc/$pid/status");
        preg_match('/^' . $field . ':\s+(\d+) kB/m', $status, $m);
        return (int) $m[1] * 1024;
    }
}
