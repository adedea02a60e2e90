<?php

declare(strict_types=1);

namespace Resilient\Tests\Client;

require_once __DIR__ . '/support/ClientTestCase.php';

use Resilient\Tests\Harness\PhpProcess;
use Resilient\Tests\Harness\Run;
use Resilient\Tests\Harness\TestCa;
use Resilient\Tests\Harness\TlsNginx;
use Resilient\Unavailable;
use Resilient\UpstreamFailed;

/**
 * Big bodies stream.
 * - `multipart` with a 50 MB file given as an fopen() resource: the mock upstream (which reads
 *   bodies as a stream and digests each multipart part, FNV-1a 64) gets the file byte for byte,
 *   and the sending PHP process's peak RSS grows by less than 10 MB; on a retry the file is sent
 *   again from the start.
 * - `sink`: a 300 MB download lands on disk, byte for byte, with RSS growth under 10 MB;
 *   `max_body` does not apply to it, the timeout does.
 * - `decode_content`: a gzip or deflate body (nginx serving a pre-encoded file with its
 *   Content-Encoding) is decoded by default and handed back raw with `decode_content => false`; a gzip bomb
 *   (256 MB of zeros, 256 KB on disk) stops at `max_body` after one request.
 * The memory numbers come from a child PHP process (tests/fixtures/client/rss_request.php).
 */
final class StreamingTest extends ClientTestCase
{
    private const BIG_UPLOAD = 50 * 1024 * 1024;
    private const BIG_DOWNLOAD = 300_000_000;
    private const RSS_LIMIT = 10 * 1024 * 1024;
    private const BOMB_MB = 256;

    private static string $dir;
    private static string $bigFile;
    private static string $bigDigest;
    private static TlsNginx $nginx;
    private static string $json;

    public static function setUpBeforeClass(): void
    {
        self::$dir = Run::tempDir('streaming');
        self::$bigFile = self::$dir . '/big.bin';
        self::sh('head -c ' . self::BIG_UPLOAD . ' /dev/urandom > ' . escapeshellarg(self::$bigFile));
        self::$bigDigest = hash_file('fnv1a64', self::$bigFile);

        self::$nginx = TlsNginx::shared();
        $gz = self::$nginx->www() . '/gz';
        self::$json = json_encode(['items' => range(1, 2000), 'note' => str_repeat('compressible ', 500)]);
        file_put_contents("$gz/data.json", gzencode(self::$json, 6));
        // HTTP's "deflate" is the zlib format (RFC 9110), what gzcompress() makes.
        file_put_contents(self::$nginx->www() . '/deflate/data.json', gzcompress(self::$json, 6));
        // As some servers send them: two gzip members one after the other, raw deflate (no zlib
        // wrapper), and bytes that are not gzip at all.
        $half = intdiv(strlen(self::$json), 2);
        file_put_contents("$gz/members.json", gzencode(substr(self::$json, 0, $half)) . gzencode(substr(self::$json, $half)));
        file_put_contents(self::$nginx->www() . '/deflate/raw.json', gzdeflate(self::$json, 6));
        file_put_contents("$gz/broken.json", 'this is not gzip');
        if (!is_file("$gz/bomb.json")) {
            self::sh('head -c ' . self::BOMB_MB . 'M /dev/zero | gzip -9 > ' . escapeshellarg("$gz/bomb.json"));
        }
    }

    public static function tearDownAfterClass(): void
    {
        @unlink(self::$bigFile);
    }

    private static function sh(string $cmd): void
    {
        exec('bash -o pipefail -c ' . escapeshellarg($cmd) . ' 2>&1', $out, $rc);
        if ($rc !== 0) {
            throw new \RuntimeException("$cmd failed: " . implode("\n", $out));
        }
    }

    /** Runs a job in a child PHP process (see the fixture) and returns its JSON report. */
    private function measured(array $job): array
    {
        $r = PhpProcess::script(Run::root() . '/tests/fixtures/client/rss_request.php', [json_encode($job)])->wait(60.0);
        $this->assertSame(0, $r->exitCode, $r->describe());
        return $r->json();
    }

    private function assertRssGrewLessThanLimit(array $out): void
    {
        $grew = $out['hwm_after'] - $out['rss_before'];
        $this->assertLessThan(self::RSS_LIMIT, $grew, sprintf(
            'peak RSS grew by %.1f MB (RSS before %.1f MB, peak after %.1f MB)',
            $grew / 1048576,
            $out['rss_before'] / 1048576,
            $out['hwm_after'] / 1048576,
        ));
    }

    private static function multipart(string $file, string $filename): array
    {
        return [
            ['name' => 'note', 'contents' => 'hello multipart'],
            ['name' => 'file', 'contents' => ['@fopen' => $file], 'filename' => $filename, 'headers' => ['Content-Type' => 'application/octet-stream']],
        ];
    }

    public function testA50MbMultipartUploadArrivesByteForByteWithRssGrowthUnder10Mb(): void
    {
        $key = $this->up->key('multipart');
        $this->up->script($key, [['status' => 201, 'body' => 'stored']]);
        $small = self::$dir . '/small.bin';
        file_put_contents($small, random_bytes(100_000));
        $out = $this->measured([
            'client' => ['base_url' => $this->up->base($key), 'timeout' => 30],
            'warmup' => [['method' => 'POST', 'path' => '/warmup', 'options' => ['multipart' => self::multipart($small, 'small.bin')]]],
            'request' => ['method' => 'POST', 'path' => '/upload', 'options' => ['multipart' => self::multipart(self::$bigFile, 'big.bin')]],
        ]);
        $this->assertNull($out['error']);
        $this->assertSame(201, $out['status']);

        $rows = $this->up->attempts($key, 2);
        $this->assertCount(2, $rows);
        $up = $rows[1];
        $this->assertSame('/upload', $up['path']);
        $this->assertMatchesRegularExpression('~^multipart/form-data; ?boundary=~', $up['headers']['content-type']);
        $this->assertArrayNotHasKey('multipart_error', $up);
        $parts = $up['parts'];
        $this->assertCount(2, $parts, json_encode($parts));
        $this->assertSame('note', $parts[0]['name']);
        $this->assertNull($parts[0]['filename']);
        $this->assertSame('hello multipart', $parts[0]['value']);
        $this->assertSame('file', $parts[1]['name']);
        $this->assertSame('big.bin', $parts[1]['filename']);
        $this->assertSame('application/octet-stream', $parts[1]['headers']['content-type']);
        $this->assertSame(self::BIG_UPLOAD, $parts[1]['len']);
        $this->assertSame(self::$bigDigest, $parts[1]['fnv1a64'], 'the file arrived byte for byte');
        $this->assertSame(hash_file('fnv1a64', $small), $rows[0]['parts'][1]['fnv1a64']);

        $this->assertRssGrewLessThanLimit($out);
    }

    public function testARetriedMultipartSendsTheFileAgainFromTheStart(): void
    {
        $key = $this->up->key('multiretry');
        $this->up->script($key, [['status' => 503], ['status' => 201]]);
        $file = self::$dir . '/retry.bin';
        file_put_contents($file, random_bytes(3_000_000));
        $f = fopen($file, 'rb');
        $r = $this->client($this->up->base($key))->post('/upload', null, [
            'idempotency_key' => 'upload-1',
            'multipart' => [['name' => 'file', 'contents' => $f, 'filename' => 'retry.bin']],
        ]);
        $this->assertSame(201, $r->status());
        $this->assertSame(2, $r->attempts());
        $rows = $this->up->attempts($key, 2);
        $this->assertCount(2, $rows);
        foreach ($rows as $row) {
            $this->assertSame(3_000_000, $row['parts'][0]['len'] ?? null, json_encode($row['parts'] ?? $row['multipart_error'] ?? null));
            $this->assertSame(hash_file('fnv1a64', $file), $row['parts'][0]['fnv1a64']);
        }
    }

    /**
     * A part's file that cannot be opened again for a retry (deleted meanwhile) is our failure,
     * 'request': not retried, and no outcome of the upstream's (no breaker failure, no metric
     * failure), so it opens no circuit for the host's other calls.
     */
    public function testAMultipartFileGoneBeforeTheRetryIsOursNotTheUpstreams(): void
    {
        $key = $this->up->key('multigone');
        $this->up->script($key, [['status' => 503], ['status' => 200]]);
        $file = self::$dir . '/gone.bin';
        file_put_contents($file, str_repeat('a', 100));
        $f = fopen($file, 'rb');
        $name = Run::name('multigone');
        $client = new \Resilient\Client($name, [
            'base_url' => $this->up->base($key),
            'max_attempts' => 4,
            'backoff' => ['base' => 0.001, 'cap' => 0.002],
            'circuit' => ['failure_ratio' => 0.5, 'min_calls' => 2, 'window' => 10.0, 'open_for' => 5.0],
            'on_attempt' => function (array $a) use ($file): void {
                $this->attemptLog[] = $a;
                @unlink($file);
            },
        ]);
        try {
            $client->request('PUT', '/upload', ['multipart' => [['name' => 'f', 'contents' => $f]]]);
            $this->fail('the retry cannot be made');
        } catch (Unavailable $e) {
            $this->assertSame('request', $e->failure(), $e->getMessage());
        }
        $this->assertSame([503, null], array_column($this->attemptLog, 'status'));
        $this->assertSame([null, 'request'], array_column($this->attemptLog, 'error'));
        $this->assertSame([true, false], array_column($this->attemptLog, 'retry_follows'));
        $this->assertCount(1, $this->up->attempts($key, 1));
        $this->assertSame(200, $client->get('/after')->status(), 'no circuit opened');
        $metrics = \Resilient\Metrics::snapshot()[$name];
        $this->assertSame(['4xx' => 0, '5xx' => 1, 'timeout' => 0, 'connection' => 0, 'other' => 0], $metrics['failures']);
    }

    /**
     * A seekable stream (`php://temp`, `php://memory`) is sent whole from its start, wherever
     * it was left, as Guzzle sends it: written and not rewound, it went out as an empty part.
     */
    public function testASeekableStreamIsSentFromItsStart(): void
    {
        $key = $this->up->key('multiseek');
        $client = $this->client($this->up->base($key));
        $memory = fopen('php://memory', 'w+');
        fwrite($memory, 'MEMORY-DATA');
        $temp = fopen('php://temp', 'w+');
        fwrite($temp, 'TEMP-DATA');
        rewind($temp);
        fread($temp, 5);
        $client->post('/upload', null, ['multipart' => [
            ['name' => 'memory', 'contents' => $memory, 'filename' => 'm.txt'],
            ['name' => 'temp', 'contents' => $temp, 'filename' => 't.txt'],
        ]]);
        $parts = $this->up->attempts($key, 1)[0]['parts'] ?? [];
        $this->assertSame([11, 9], array_column($parts, 'len'), json_encode($parts));
        $this->assertSame([hash('fnv1a64', 'MEMORY-DATA'), hash('fnv1a64', 'TEMP-DATA')], array_column($parts, 'fnv1a64'));
    }

    /**
     * A part's stream that stalls (a socket whose peer sent half and went quiet, a pipe whose
     * writer is slow) is read at most until the call's deadline, and then nothing is sent: it
     * ran 60 s (default_socket_timeout) under a 1.5 s deadline and then sent the half it had as
     * if whole, answered 200. Without a deadline, a socket's own timeout running out is the
     * same error, never a part cut short.
     */
    public function testAStalledStreamIsNotSentCutShortNorReadPastTheDeadline(): void
    {
        $key = $this->up->key('multistall');
        $server = stream_socket_server('tcp://127.0.0.1:0');
        $socket = stream_socket_client('tcp://' . stream_socket_get_name($server, false));
        $peer = stream_socket_accept($server);
        fwrite($peer, 'FIRST-HALF-');
        $t = hrtime(true);
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['deadline' => 0.3])
            ->post('/upload', null, ['multipart' => [['name' => 'upload', 'contents' => $socket]]]));
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertInstanceOf(\RuntimeException::class, $e, self::describe($e));
        $this->assertNotInstanceOf(Unavailable::class, $e, 'the stream is ours, not the upstream\'s: no fallback');
        $this->assertSame("option 'multipart.0.contents': the stream did not reach its end (the call's deadline came first); nothing was sent", $e->getMessage());
        $this->assertLessThan(1000, $ms, 'ended at the deadline (generous bound)');
        $this->assertGreaterThanOrEqual(300, $ms, 'waited for the data until the deadline');

        // An enclosing deadline bounds it too; a pipe, whose read has no timeout of its own.
        $pipe = popen('sleep 1; echo late 2>/dev/null', 'r');
        $t = hrtime(true);
        $e = self::thrown(fn () => \Resilient\Deadline::within(0.3, fn () => $this->client($this->up->base($key))
            ->post('/upload', null, ['multipart' => [['name' => 'a', 'contents' => $pipe]]])));
        $ms = (hrtime(true) - $t) / 1e6;
        $this->assertInstanceOf(\RuntimeException::class, $e, self::describe($e));
        $this->assertStringContainsString('the stream did not reach its end', $e->getMessage());
        $this->assertLessThan(1000, $ms, 'ended at the deadline (generous bound)');

        // No deadline: the socket's own timeout.
        $socket = stream_socket_client('tcp://' . stream_socket_get_name($server, false));
        $peer2 = stream_socket_accept($server);
        fwrite($peer2, 'HALF');
        stream_set_timeout($socket, 0, 200_000);
        $e = self::thrown(fn () => $this->client($this->up->base($key))
            ->post('/upload', null, ['multipart' => [['name' => 'upload', 'contents' => $socket]]]));
        $this->assertInstanceOf(\RuntimeException::class, $e, self::describe($e));
        $this->assertStringContainsString("its socket's timeout (default_socket_timeout) ran out", $e->getMessage());
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');

        // Data that does come within the deadline, from a pipe: sent whole.
        $pipe = popen('printf part-one; sleep 0.1; printf part-two', 'r');
        $this->client($this->up->base($key), ['deadline' => 2.0])
            ->post('/upload', null, ['multipart' => [['name' => 'a', 'contents' => $pipe]]]);
        $parts = $this->up->attempts($key, 1)[0]['parts'] ?? [];
        $this->assertSame(hash('fnv1a64', 'part-onepart-two'), $parts[0]['fnv1a64'] ?? null, json_encode($parts));
        fclose($peer);
        fclose($peer2);
    }

    /**
     * A part's stream that never ends is refused, never read until PHP dies of it. `/dev/zero`
     * (seekable, so read "to its end" at once) made the call a fatal `Allowed memory size
     * exhausted`, whatever the deadline; from an endless pipe the contents are read up to what
     * `memory_limit` leaves (a pipe read under a deadline grew the process by what came in that
     * time, outside `memory_limit`). Each runs in a child with `memory_limit=64M`, so a fatal
     * error shows as an exit code.
     */
    public function testAStreamThatNeverEndsIsRefusedNotAFatalError(): void
    {
        $post = fn (string $contents, string $options = '[]') => sprintf(
            '(new Resilient\\Client("endless", ["base_url" => "http://127.0.0.1:9", "max_attempts" => 1] + %s))'
            . '->post("/", null, ["multipart" => [["name" => "a", "contents" => %s]]]);',
            $options,
            $contents,
        );
        $link = Run::tempDir('endless') . '/urandom';
        symlink('/dev/urandom', $link);
        $cases = [
            'a device that never ends' => [$post('fopen("/dev/zero", "r")', '["deadline" => 1.0]'), 'ValueError',
                "option 'multipart.0.contents': the stream reads /dev/zero, which never ends; nothing was sent"],
            'the same by another path' => [$post("fopen('$link', 'r')"), 'ValueError',
                "option 'multipart.0.contents': the stream reads $link, which never ends"],
            'two parts that fit alone, not together' => ['$a = fopen("php://temp", "w+"); fwrite($a, str_repeat("a", 36 << 20)); '
                . '$b = fopen("php://temp", "w+"); fwrite($b, str_repeat("b", 36 << 20)); '
                . str_replace('[["name" => "a", "contents" => X]]', '[["name" => "a", "contents" => $a], ["name" => "b", "contents" => $b]]', $post('X')),
                'RuntimeException', "option 'multipart.1.contents': the stream did not reach its end (it holds more than memory_limit leaves"],
            'an endless pipe' => [$post('popen("cat /dev/zero", "r")'), 'RuntimeException',
                "option 'multipart.0.contents': the stream did not reach its end (it holds more than memory_limit leaves"],
            'an endless pipe read under a deadline' => [$post('popen("cat /dev/zero", "r")', '["deadline" => 30.0]'), 'RuntimeException',
                "option 'multipart.0.contents': the stream did not reach its end (it holds more than memory_limit leaves"],
        ];
        foreach ($cases as $case => [$code, $class, $message]) {
            $r = PhpProcess::runScript('expect_throw.php', [$code . ' return "sent";'], ['memory_limit' => '64M'], 60);
            $this->assertSame(0, $r->exitCode, "$case: the child must not die:\n" . $r->describe());
            $result = $r->json();
            $this->assertSame([$class, true], [$result['class'] ?? null, str_starts_with($result['message'] ?? '', $message)], "$case: " . json_encode($result));
        }
    }

    /**
     * A part's stream runs PHP code (a stream wrapper) while the call reads it, and that code
     * may free the part (reached by reference) or grow the list of parts: the call sends the
     * parts as they were when it was made. Before, it went on reading the freed arrays: a
     * segfault, or a wrong part (valgrind: invalid reads in `multipart()`). Likewise a pool
     * item's options given by reference and freed by a `json` body's jsonSerialize(): the
     * `multipart` beside it is still read (and refused beside `json`), where it segfaulted.
     */
    public function testAStreamThatRewritesItsPartsWhileReadSendsThemAsGiven(): void
    {
        $key = $this->up->key('multirewritten');
        foreach (['validate', 'request'] as $mode) {
            $r = PhpProcess::script('multipart_rewritten.php', [$this->up->base($key), $mode])->wait(30);
            $this->assertSame(0, $r->exitCode, "$mode: the child must not die:\n" . $r->describe());
            $this->assertSame($mode === 'validate' ? ['validated' => true] : ['status' => 200], $r->json(), $mode);
        }
        $r = PhpProcess::script('multipart_rewritten.php', [$this->up->base($key), 'pool'])->wait(30);
        $this->assertSame(0, $r->exitCode, "pool: the child must not die:\n" . $r->describe());
        $this->assertSame(['class' => 'ValueError', 'message' => "pool request 'only': option 'json': only one of 'json', 'body', 'form' and 'multipart' may be given"], $r->json());
        $parts = $this->up->attempts($key, 1)[0]['parts'] ?? [];
        $this->assertSame(
            [['a', 'f.txt', 'b', 'data'], ['second', null, null, 'two']],
            array_map(fn ($p) => [$p['name'], $p['filename'], $p['headers']['x-a'] ?? null, $p['value']], $parts),
            json_encode($parts),
        );
    }

    /**
     * What ends is sent whole: `/dev/null` (a device too) as an empty part, and a stream whose
     * wrapper never says it reached its end (`stream_eof` always false, as a PSR-7 stream
     * whose `eof()` lies, through Guzzle's StreamWrapper) once a read gives nothing, as it was
     * sent before the stream was read in chunks (which then spun until the deadline).
     */
    public function testADeviceThatEndsAndAStreamThatNeverSaysSoAreSentWhole(): void
    {
        $key = $this->up->key('multiends');
        if (!in_array('resilient-lax-eof', stream_get_wrappers(), true)) {
            stream_wrapper_register('resilient-lax-eof', LaxEofStream::class);
        }
        $this->client($this->up->base($key), ['deadline' => 5.0])->post('/upload', null, ['multipart' => [
            ['name' => 'null', 'contents' => fopen('/dev/null', 'r')],
            ['name' => 'lax', 'contents' => fopen('resilient-lax-eof://x', 'r')],
        ]]);
        $parts = $this->up->attempts($key, 1)[0]['parts'] ?? [];
        $this->assertSame([0, 100], array_column($parts, 'len'), json_encode($parts));
        $this->assertSame(hash('fnv1a64', str_repeat('l', 100)), $parts[1]['fnv1a64']);
    }

    /**
     * A plain file whose size says nothing of its contents (/proc reports 0 bytes) is read
     * through its stream, not sent as an empty part; a directory stream is refused by name.
     */
    public function testAProcFileIsSentWholeAndADirectoryIsRefused(): void
    {
        $key = $this->up->key('multiproc');
        $client = $this->client($this->up->base($key));
        $expected = file_get_contents('/proc/version');
        $client->post('/upload', null, ['multipart' => [['name' => 'v', 'contents' => fopen('/proc/version', 'r')]]]);
        $row = $this->up->attempts($key, 1)[0];
        $this->assertSame(strlen($expected), $row['parts'][0]['len'] ?? null, json_encode($row['parts'] ?? $row['multipart_error'] ?? null));
        $this->assertSame(hash('fnv1a64', $expected), $row['parts'][0]['fnv1a64']);
        $this->assertSame('version', $row['parts'][0]['filename'] ?? null, 'the file name still comes from the path');

        foreach (['sink' => fn ($r) => ['sink' => $r], 'multipart.0.contents' => fn ($r) => ['multipart' => [['name' => 'f', 'contents' => $r]]]] as $option => $options) {
            $e = self::thrown(fn () => $client->post('/dir', null, $options(opendir(self::$dir))));
            $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
            $this->assertStringStartsWith("option '$option': the stream is a directory", $e->getMessage());
        }
        $this->assertCount(1, $this->up->attempts($key), 'nothing sent for the directories');
    }

    public function testA300MbSinkDownloadLandsOnDiskWithRssGrowthUnder10Mb(): void
    {
        $key = $this->up->key('sink');
        $this->up->script($key, [['stream' => ['bytes' => 1_000_000]]], 'repeat_last', '/warm');
        $this->up->script($key, [['stream' => ['bytes' => self::BIG_DOWNLOAD]]], 'repeat_last', '/big');
        $target = self::$dir . '/download.bin';
        $out = $this->measured([
            // max_body does not apply to a sink: 1 MB here, 300 MB downloaded.
            'client' => ['base_url' => $this->up->base($key), 'timeout' => 40, 'max_body' => 1_000_000],
            'warmup' => [['method' => 'GET', 'path' => '/warm', 'options' => ['sink' => self::$dir . '/warm.bin']]],
            'request' => ['method' => 'GET', 'path' => '/big', 'options' => ['sink' => $target]],
        ]);
        try {
            $this->assertNull($out['error']);
            $this->assertSame(200, $out['status']);
            $this->assertSame(0, $out['body_len'], 'with a sink body() is empty');
            $this->assertSame(1_000_000, filesize(self::$dir . '/warm.bin'));
            clearstatcache();
            $this->assertSame(self::BIG_DOWNLOAD, filesize($target));
            // The upstream sends 'x' bytes: compare the file in 8 MB slices.
            $f = fopen($target, 'rb');
            $chunk = str_repeat('x', 8 << 20);
            $left = self::BIG_DOWNLOAD;
            while ($left > 0) {
                $n = min($left, strlen($chunk));
                $this->assertTrue(fread($f, $n) === substr($chunk, 0, $n), 'byte for byte at offset ' . (self::BIG_DOWNLOAD - $left));
                $left -= $n;
            }
            fclose($f);
            $this->assertRssGrewLessThanLimit($out);
        } finally {
            @unlink($target);
        }
    }

    public function testASinkStillEndsAtTheTimeout(): void
    {
        $key = $this->up->key('sinkendless');
        $this->up->script($key, [['stream' => new \stdClass()]]);
        $target = self::$dir . '/endless.bin';
        $t = microtime(true);
        $e = self::thrown(fn () => $this->client($this->up->base($key), ['timeout' => 0.5, 'max_attempts' => 1])
            ->get('/endless', null, ['sink' => $target]));
        $elapsed = microtime(true) - $t;
        @unlink($target);
        $this->assertInstanceOf(Unavailable::class, $e, self::describe($e));
        $this->assertLessThan(3.0, $elapsed, 'the timeout ends an endless download into a sink');
    }

    /**
     * A FIFO with a reader (`cat fifo > out`, `| jq`) is a sink like a file: the reader gets
     * the whole body and the end of its input when the call ends. The option's check opened and
     * closed the FIFO's write end: the reader saw an empty input and left, and the sink's own
     * open failed (ENXIO) after the request was sent.
     */
    public function testAFifoWithAReaderGetsTheWholeBody(): void
    {
        $key = $this->up->key('sink-fifo');
        $this->up->script($key, [['stream' => ['bytes' => 300_000]]]);
        $fifo = self::$dir . '/' . $key . '.fifo';
        $out = self::$dir . '/' . $key . '.out';
        $this->assertTrue(posix_mkfifo($fifo, 0600));
        $reader = proc_open(['sh', '-c', 'exec cat "$0" > "$1"', $fifo, $out], [], $pipes);
        try {
            $client = $this->client($this->up->base($key), ['max_attempts' => 1]);
            // Refused, nothing sent, until the reader has the FIFO open.
            for ($until = microtime(true) + 5; ; usleep(10_000)) {
                try {
                    $status = $client->get('/file', null, ['sink' => $fifo])->status();
                    break;
                } catch (\ValueError $e) {
                    $this->assertStringContainsString('no reader', $e->getMessage());
                    if (microtime(true) > $until) {
                        throw $e;
                    }
                }
            }
            $this->assertSame(200, $status);
            for ($until = microtime(true) + 5; proc_get_status($reader)['running'] && microtime(true) < $until; usleep(10_000)) {
            }
            $this->assertFalse(proc_get_status($reader)['running'], 'the reader saw the end of its input when the call ended');
            $this->assertSame(str_repeat('x', 300_000), file_get_contents($out));
        } finally {
            proc_terminate($reader, 9);
            proc_close($reader);
            @unlink($fifo);
            @unlink($out);
        }
    }

    /**
     * A FIFO whose reader stopped reading holds the body back: the attempt still ends at its
     * timeout. Each write waited for the reader with no bound (the call returned only when the
     * reader went; never, for one that stays).
     */
    public function testAFifoWhoseReaderStalledEndsAtTheTimeout(): void
    {
        $key = $this->up->key('sink-fifo-stalled');
        $this->up->script($key, [['stream' => ['bytes' => 2_000_000]]]);
        $fifo = self::$dir . '/' . $key . '.fifo';
        $this->assertTrue(posix_mkfifo($fifo, 0600));
        // Opens the FIFO, never reads.
        $reader = proc_open(['sh', '-c', 'exec 3<"$0"; exec sleep 30', $fifo], [], $pipes);
        try {
            $client = $this->client($this->up->base($key), ['timeout' => 0.5, 'max_attempts' => 1]);
            for ($until = microtime(true) + 5; ; usleep(10_000)) {
                $t = microtime(true);
                $e = self::thrown(fn () => $client->get('/file', null, ['sink' => $fifo]));
                $elapsed = microtime(true) - $t;
                if (! $e instanceof \ValueError || microtime(true) > $until) {
                    break;
                }
            }
            $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
            $this->assertSame('timeout', $e->failure(), self::describe($e));
            $this->assertLessThan(3.0, $elapsed, 'ended at the 0.5 s timeout, not when the reader goes');
        } finally {
            proc_terminate($reader, 9);
            proc_close($reader);
            @unlink($fifo);
        }
    }

    public function testAGzipBodyIsDecodedByDefaultAndRawOnRequest(): void
    {
        $url = self::$nginx->url('plain');
        $r = $this->client($url)->get('/gz/data.json');
        $this->assertSame(200, $r->status());
        $this->assertSame(self::$json, $r->body());
        $this->assertSame(range(1, 2000), $r->json()['items']);

        $raw = $this->client($url, ['decode_content' => false])->get('/gz/data.json');
        $this->assertSame(file_get_contents(self::$nginx->www() . '/gz/data.json'), $raw->body());
        $this->assertSame('gzip', $raw->header('Content-Encoding'));

        $this->assertSame(self::$json, $this->client($url, ['decode_content' => false])->get('/gz/data.json', null, ['decode_content' => true])->body(), 'per request too');
    }

    public function testADeflateBodyIsDecodedAndTheOriginalHeadersAreKept(): void
    {
        $r = $this->client(self::$nginx->url('plain'))->get('/deflate/data.json');
        $this->assertSame(self::$json, $r->body());
        $this->assertSame('deflate', $r->header('X-Encoded-Content-Encoding'));
        $this->assertSame((string) filesize(self::$nginx->www() . '/deflate/data.json'), $r->header('X-Encoded-Content-Length'));
        $this->assertNull($r->header('Content-Encoding'), 'the body handed back is not encoded any more');
    }

    public function testGzipMembersAndRawDeflateAreDecoded(): void
    {
        $client = $this->client(self::$nginx->url('plain'));
        $this->assertSame(self::$json, $client->get('/gz/members.json')->body(), 'two gzip members');
        $this->assertSame(self::$json, $client->get('/deflate/raw.json')->body(), 'raw deflate');
    }

    public function testABodyThatCannotBeDecodedIsNotRetried(): void
    {
        $before = count(self::$nginx->requests('plain'));
        $e = self::thrown(fn () => $this->client(self::$nginx->url('plain'))->get('/gz/broken.json'));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame('decode', $e->failure());
        $this->assertStringContainsString('cannot decode the response body', $e->getMessage());
        $this->assertCount(1, $this->attemptLog, 'the same bytes would come again: not retried');
        $this->waitFor(fn () => count(self::$nginx->requests('plain')) >= $before + 1, 5.0, 'nginx logs the request');
        $broken = array_filter(array_slice(self::$nginx->requests('plain'), $before), fn (array $r) => str_contains($r['request'], '/gz/broken.json'));
        $this->assertCount(1, $broken, 'one request reached nginx');
    }

    public function testASinkThatCannotBeWrittenIsRefusedBeforeAnythingIsSent(): void
    {
        $key = $this->up->key('sink-cannot-create');
        $this->up->script($key, [['status' => 200, 'body' => 'lost']]);
        // The directory exists (the old check passed) but no file can be made there: the answer
        // of a POST that changed something would be lost.
        $e = self::thrown(fn () => $this->client($this->up->base($key))->post('/orders', ['sku' => 1], ['sink' => '/proc/self/resilient-sink', 'idempotency_key' => 'k-1']));
        $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
        $this->assertStringStartsWith("option 'sink': cannot write /proc/self/resilient-sink", $e->getMessage());
        $this->assertSame([], $this->attemptLog, 'no attempt');
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');
    }

    public function testACallThatGetsNoAnswerLeavesTheSinkFileAsItWas(): void
    {
        $path = self::$dir . '/yesterday.csv';
        file_put_contents($path, 'yesterday');
        $e = self::thrown(fn () => $this->client('http://127.0.0.1:' . Run::freePort(), ['max_attempts' => 1])->get('/export.csv', null, ['sink' => $path]));
        $this->assertInstanceOf(UpstreamFailed::class, $e, self::describe($e));
        $this->assertSame('connect', $e->failure());
        $this->assertSame('yesterday', file_get_contents($path), 'truncated only when an answer comes');
        $missing = self::$dir . '/never.csv';
        self::thrown(fn () => $this->client('http://127.0.0.1:' . Run::freePort(), ['max_attempts' => 1])->get('/x', null, ['sink' => $missing]));
        $this->assertFileDoesNotExist($missing, 'the check made no file');
    }

    public function testAGzipBodyIsDecodedIntoASink(): void
    {
        $path = self::$dir . '/decoded.json';
        $r = $this->client(self::$nginx->url('plain'))->get('/gz/data.json', null, ['sink' => $path]);
        $this->assertSame(200, $r->status());
        $this->assertSame(self::$json, file_get_contents($path), 'the sink gets the decoded body');
    }

    public function testAnEncodedAnswerWithoutABodyIsAnEmptyBody(): void
    {
        // A HEAD answer carries the GET's Content-Encoding and Content-Length but no body; a 204
        // or 304 (a conditional GET) may carry Content-Encoding; nothing to decode in any of them.
        foreach (['http' => self::$nginx->url('plain'), 'https' => self::$nginx->url('ok')] as $scheme => $url) {
            $head = $this->client($url, ['verify' => TestCa::shared()->path('ca.pem')])->head('/gz/data.json');
            $this->assertSame(200, $head->status(), $scheme);
            $this->assertSame('', $head->body());
            $this->assertSame(1, $head->attempts());
        }
        foreach ([204, 304] as $status) {
            $key = $this->up->key("enc$status");
            $this->up->script($key, [['status' => $status, 'headers' => ['Content-Encoding' => 'gzip', 'ETag' => '"v1"']]]);
            $r = $this->client($this->up->base($key))->get('/x', null, ['headers' => ['If-None-Match' => '"v1"']]);
            $this->assertSame($status, $r->status());
            $this->assertSame('', $r->body());
            $this->assertSame(1, $r->attempts());
        }
        $key = $this->up->key('encempty');
        $this->up->script($key, [['status' => 200, 'body' => '', 'headers' => ['Content-Encoding' => 'gzip']]]);
        $this->assertSame('', $this->client($this->up->base($key))->get('/x')->body(), 'an empty 200 with Content-Encoding (curl and Guzzle hand back "")');
    }

    public function testADecodeContentStringIsSentAsAcceptEncoding(): void
    {
        $key = $this->up->key('acceptenc');
        $this->up->script($key, [['status' => 200]]);
        $this->client($this->up->base($key), ['decode_content' => 'gzip'])->get('/x');
        $this->assertSame('gzip', $this->up->attempts($key, 1)[0]['headers']['accept-encoding'] ?? null);
    }

    public function testASinkMayBeAStreamAndKeepsOnlyTheLastAttemptsBody(): void
    {
        $key = $this->up->key('sinkretry');
        $this->up->script($key, [['status' => 503, 'body' => str_repeat('e', 5000)], ['stream' => ['bytes' => 1000]]]);
        $path = self::$dir . '/retry-sink.bin';
        $f = fopen($path, 'w');
        $r = $this->client($this->up->base($key))->get('/file', null, ['sink' => $f]);
        fclose($f);
        $this->assertSame(200, $r->status());
        $this->assertSame(2, $r->attempts());
        $this->assertSame('', $r->body());
        clearstatcache();
        $this->assertSame(str_repeat('x', 1000), file_get_contents($path), 'the file holds the answer of the last attempt only');
    }

    public function testAStreamIsUsedOnlyTheWayItWasOpened(): void
    {
        $key = $this->up->key('streammode');
        $this->up->script($key, [['status' => 200, 'body' => 'payload']]);
        $client = $this->client($this->up->base($key));

        // A sink stream opened read-only: refused, and the file is left as it was.
        $path = self::$dir . '/readonly.txt';
        file_put_contents($path, 'keep me');
        $e = self::thrown(fn () => $client->get('/x', null, ['sink' => fopen($path, 'r')]));
        $this->assertTrue($e instanceof \ValueError || $e instanceof \TypeError, self::describe($e));
        $this->assertStringContainsString("'sink", $e->getMessage());
        $this->assertSame('keep me', file_get_contents($path));

        // Nor one opened to append: the body replaces the file's content (Guzzle would append).
        foreach (['a', 'ab', 'a+'] as $mode) {
            $e = self::thrown(fn () => $client->get('/x', null, ['sink' => fopen($path, $mode)]));
            $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
            $this->assertStringStartsWith("option 'sink': the stream was opened to append (mode '$mode')", $e->getMessage());
            $this->assertSame('keep me', file_get_contents($path));
        }

        // A multipart stream opened write-only (Guzzle: "Cannot read from non-readable stream").
        $e = self::thrown(fn () => $client->post('/x', null, ['multipart' => [['name' => 'f', 'contents' => fopen($path, 'a'), 'filename' => 'f.txt']]]));
        $this->assertTrue($e instanceof \ValueError || $e instanceof \TypeError, self::describe($e));
        $this->assertStringContainsString("'multipart", $e->getMessage());

        // A closed stream, or a stream context: refused naming the option, not a TypeError
        // from a PHP function the option's reader called.
        $closed = fopen($path, 'r+');
        fclose($closed);
        foreach (['sink' => fn ($r) => ['sink' => $r], 'multipart.0.contents' => fn ($r) => ['multipart' => [['name' => 'f', 'contents' => $r]]]] as $option => $options) {
            foreach ([$closed, stream_context_create()] as $resource) {
                $e = self::thrown(fn () => $client->post('/x', null, $options($resource)));
                $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
                $this->assertStringStartsWith("option '$option': the resource is not an open stream", $e->getMessage());
            }
        }
        $this->assertSame([], $this->up->attempts($key), 'nothing was sent');
    }

    /**
     * A stream's file is sent (or written) by its path, so that path must still name the file
     * the stream has open. When it does not (a relative fopen() before a chdir(), a file
     * renamed, replaced or deleted since), a multipart part is read from the stream itself (the
     * intended bytes, never another file's), and a sink is refused: no other file is touched.
     */
    public function testAStreamWhoseFileIsNoLongerAtItsPathIsNeverAnotherFile(): void
    {
        $key = $this->up->key('streammoved');
        $this->up->script($key, array_fill(0, 6, ['status' => 200, 'body' => 'payload']));
        $client = $this->client($this->up->base($key));
        $d1 = self::$dir . '/moved-d1';
        $d2 = self::$dir . '/moved-d2';
        @mkdir($d1);
        @mkdir($d2);
        file_put_contents("$d1/data.txt", 'INTENDED');
        file_put_contents("$d2/data.txt", 'OTHER-FILE');
        $cwd = getcwd();
        $sent = fn (int $n) => $this->up->attempts($key, $n)[$n - 1]['body'];
        try {
            chdir($d1);
            $upload = fopen('data.txt', 'r');
            $sink = fopen('data.txt', 'r+');
            chdir($d2);
            $client->post('/x', null, ['multipart' => [['name' => 'f', 'contents' => $upload]]]);
            $this->assertStringContainsString('INTENDED', $sent(1));
            $this->assertStringContainsString('filename="data.txt"', $sent(1));
            $e = self::thrown(fn () => $client->get('/x', null, ['sink' => $sink]));
            $this->assertInstanceOf(\ValueError::class, $e, self::describe($e));
            $this->assertStringStartsWith("option 'sink': the stream's file is no longer at 'data.txt'", $e->getMessage());
            $this->assertSame('OTHER-FILE', file_get_contents("$d2/data.txt"), 'the other file is untouched');
            $this->assertSame('INTENDED', file_get_contents("$d1/data.txt"));

            // Replaced since fopen() (written elsewhere and renamed over it), or deleted while open.
            $replaced = fopen("$d1/data.txt", 'r');
            file_put_contents("$d1/new.txt", 'NEWER');
            rename("$d1/new.txt", "$d1/data.txt");
            $client->post('/x', null, ['multipart' => [['name' => 'f', 'contents' => $replaced]]]);
            $this->assertStringContainsString('INTENDED', $sent(2));
            $deleted = fopen("$d1/data.txt", 'r');
            unlink("$d1/data.txt");
            $client->post('/x', null, ['multipart' => [['name' => 'f', 'contents' => $deleted]]]);
            $this->assertStringContainsString('NEWER', $sent(3));

            // Opened with a file:// URL: the file itself.
            file_put_contents("$d1/url.txt", 'BY-URL');
            $client->post('/x', null, ['multipart' => [['name' => 'f', 'contents' => fopen("file://$d1/url.txt", 'r')]]]);
            $this->assertStringContainsString('BY-URL', $sent(4));
            $byUrl = fopen("file://$d1/sink.txt", 'w');
            $client->get('/x', null, ['sink' => $byUrl]);
            fclose($byUrl);
            $this->assertSame('payload', file_get_contents("$d1/sink.txt"));
        } finally {
            chdir($cwd);
        }
    }

    public function testAGzipBombStopsAtMaxBodyAfterOneRequest(): void
    {
        $max = 8 * 1024 * 1024;
        $before = count(self::$nginx->requests('plain'));
        $out = $this->measured([
            'client' => ['base_url' => self::$nginx->url('plain'), 'max_body' => $max, 'timeout' => 20, 'max_attempts' => 3, 'backoff' => ['base' => 0.001, 'cap' => 0.002]],
            'warmup' => [['method' => 'GET', 'path' => '/gz/data.json']],
            'request' => ['method' => 'GET', 'path' => '/gz/bomb.json'],
        ]);
        $this->assertNotNull($out['error'], json_encode($out));
        $this->assertStringStartsWith(UpstreamFailed::class . ': ', $out['error']);
        $this->assertStringContainsString('max_body', $out['error']);
        $this->assertLessThan(10_000, $out['elapsed_ms']);
        $grew = $out['hwm_after'] - $out['rss_before'];
        $this->assertLessThan(3 * $max, $grew, sprintf('peak RSS grew by %.1f MB: the bomb was not decoded whole', $grew / 1048576));
        $this->waitFor(fn () => count(self::$nginx->requests('plain')) >= $before + 2, 5.0, 'nginx logs both requests');
        $bombs = array_filter(self::$nginx->requests('plain'), fn (array $r) => str_contains($r['request'], '/gz/bomb.json'));
        $this->assertCount(1, $bombs, 'not retried');
    }
}

/** A stream wrapper that gives 100 bytes and never says it reached its end. */
final class LaxEofStream
{
    /** @var resource|null */
    public $context;
    private int $given = 0;

    public function stream_open(string $path, string $mode, int $options, ?string &$opened): bool
    {
        return true;
    }

    public function stream_read(int $count): string
    {
        $n = min($count, 100 - $this->given);
        $this->given += $n;

        return str_repeat('l', $n);
    }

    public function stream_eof(): bool
    {
        return false;
    }
}
