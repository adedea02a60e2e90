//! Where a response body goes as it arrives: decoded (gzip, deflate, br) or not, into a
//! [`BodyBuffer`] bounded by `max_body`, or into a file (`sink`).
//!
//! Decoding happens chunk by chunk into the bounded buffer, so `max_body` bounds the *decoded*
//! size: a decompression bomb stops at the limit, never inflating beyond it. When a body is
//! decoded, its `Content-Encoding` and `Content-Length` headers are renamed
//! `X-Encoded-Content-Encoding` / `X-Encoded-Content-Length` (they describe bytes the caller
//! never sees), as Guzzle does. `gzip` may hold several members (decoded one after the other);
//! `deflate` is zlib-wrapped as the RFC says or raw as some servers send it (told apart by its
//! first two bytes, as curl does). A body that cannot be decoded is a [`FailureKind::Decode`]:
//! the same request would get the same bytes, so it is never retried.
//!
//! A sink file is created (truncated) when an attempt's answer arrives, so a call that gets
//! none leaves it as it was; whether it can be written is checked when the option is given
//! ([`crate::RequestOptions::sink`]). Failing to write it later is a [`FailureKind::Sink`]: ours,
//! never retried, and nothing the guards learn from. Its writes are bounded by the attempt's
//! timeout, not by `max_body`.
//!
//! Every write (a decoder's output comes in writes of at most 32 KB) checks the attempt's end
//! first: a network chunk may decode to a thousand times its size, and the transport's timer
//! cannot fire while one chunk is being decoded. Without the check a 4 MB gzip answer wrote
//! 4 GiB into a sink over 8 s of a 0.5 s timeout, holding its funnel slot past its lease.

use std::fs::File;
use std::io::{self, Write};
use std::time::Instant;

use crate::body_limit::BodyBuffer;
use crate::body_memory::BodyLimit;
use crate::transport::{FailureKind, TransportError};
use crate::transport_options::BodyTarget;

/// A body being received.
pub struct ResponseBody {
    writer: Box<dyn Finish>,
    /// Bytes received so far (encoded): an empty body is empty whatever its encoding says
    /// (HEAD, 204, 304, an empty 200 marked gzip), never an incomplete stream.
    received: u64,
    /// The response said where its body ends (`Content-Length`, chunked): the transport fails
    /// a transfer cut short before [`ResponseBody::finish`], so an encoded stream that stops
    /// short there was sent so (bytes the same request gets again), not cut by an early close.
    framed: bool,
}

impl ResponseBody {
    /// Starts receiving the body of a response with these headers (renamed when decoding).
    pub fn start(
        target: &BodyTarget,
        headers: &mut [(String, Vec<u8>)],
        content_length: Option<u64>,
        limit: impl Into<BodyLimit>,
    ) -> Result<Self, TransportError> {
        let encoding = if target.decode {
            Encoding::of(headers)
        } else {
            None
        };
        let framed = content_length.is_some()
            || headers.iter().any(|(n, v)| {
                n == "transfer-encoding" && v.to_ascii_lowercase().ends_with(b"chunked")
            });
        let destination = match &target.sink {
            // Created (truncated) only now that an answer came: a call that gets none leaves
            // the file as it was.
            Some(path) => Destination::File(
                create_sink(path).map_err(|e| {
                    TransportError::new(
                        FailureKind::Sink,
                        format!("cannot create the sink file {}: {e}", path.display()),
                    )
                })?,
                target.write_until,
            ),
            None => {
                // The announced length is the encoded one: with decoding, only the decoded size
                // counts (checked as it grows).
                let announced = if encoding.is_some() {
                    None
                } else {
                    content_length
                };
                Destination::Memory(
                    BodyBuffer::new(announced, limit.into())?,
                    target.write_until,
                )
            }
        };
        let writer: Box<dyn Finish> = match encoding {
            None => Box::new(destination),
            Some(encoding) => {
                for (name, _) in headers.iter_mut() {
                    if name == "content-encoding" || name == "content-length" {
                        *name = format!("x-encoded-{name}");
                    }
                }
                match encoding {
                    Encoding::Gzip => Box::new(flate2::write::MultiGzDecoder::new(destination)),
                    Encoding::Deflate => {
                        Box::new(Deflate::Undecided(Vec::new(), Some(destination)))
                    }
                    Encoding::Brotli => Box::new(brotli_decompressor::DecompressorWriter::new(
                        destination,
                        64 * 1024,
                    )),
                }
            }
        };
        Ok(Self {
            writer,
            received: 0,
            framed,
        })
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        self.received += chunk.len() as u64;
        self.writer.write_all(chunk).map_err(transport_error)
    }

    /// The body kept in memory (empty when it went to a sink). An encoded stream that stops
    /// short in a body read until the connection closed is a [`FailureKind::Body`] error
    /// (transient): an early close ends it like this, and another attempt may get it whole. In
    /// a body whose end the response framed, it is a [`FailureKind::Decode`] (`{}` marked gzip).
    pub fn finish(self) -> Result<Vec<u8>, TransportError> {
        if self.received == 0 {
            return Ok(Vec::new());
        }
        let framed = self.framed;
        self.writer.finish().map_err(|e| {
            let e = transport_error(e);
            match e.kind {
                FailureKind::Decode if !framed => TransportError::new(FailureKind::Body, e.detail),
                _ => e,
            }
        })
    }
}

/// Response headers as the transport reports them: lower-case names, bytes as received.
pub(crate) fn header_list(headers: &reqwest::header::HeaderMap) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|(n, v)| (n.as_str().to_owned(), v.as_bytes().to_vec()))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Gzip,
    Deflate,
    Brotli,
}

impl Encoding {
    /// A single supported `Content-Encoding`; anything else is handed back as received.
    fn of(headers: &[(String, Vec<u8>)]) -> Option<Self> {
        let mut found = headers.iter().filter(|(n, _)| n == "content-encoding");
        let (_, value) = found.next()?;
        if found.next().is_some() {
            return None;
        }
        match value.trim_ascii().to_ascii_lowercase().as_slice() {
            b"gzip" | b"x-gzip" => Some(Encoding::Gzip),
            b"deflate" => Some(Encoding::Deflate),
            b"br" => Some(Encoding::Brotli),
            _ => None,
        }
    }
}

/// Where the body goes, and the attempt's end (`BodyTarget::write_until`), past which no
/// write is made.
enum Destination {
    Memory(BodyBuffer, Option<Instant>),
    File(File, Option<Instant>),
}

impl Destination {
    fn until(&self) -> Option<Instant> {
        match self {
            Destination::Memory(_, until) | Destination::File(_, until) => *until,
        }
    }
}

/// The attempt ended while its body was being written.
fn out_of_time(what: &str) -> io::Error {
    io::Error::other(TransportError::new(
        FailureKind::Timeout,
        format!("the attempt timed out: {what}"),
    ))
}

impl Write for Destination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.until().is_some_and(|until| Instant::now() >= until) {
            return Err(out_of_time("its body was still being written"));
        }
        match self {
            Destination::Memory(b, _) => b.push(buf).map(|()| buf.len()).map_err(io::Error::other),
            Destination::File(f, until) => loop {
                match f.write(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(f, *until)?,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    written => break written.map_err(sink_error),
                }
            },
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Destination::Memory(..) => Ok(()),
            Destination::File(f, _) => f.flush().map_err(sink_error),
        }
    }
}

/// Waits until the sink (a FIFO whose reader is slow: its buffer is full) takes more, or
/// `until` passes: then the attempt has timed out. This blocks the runtime's thread, as a
/// write to a slow disk does, but never past the attempt's timeout (a blocking write waited
/// for a reader that stopped reading for as long as it lived).
fn wait_writable(f: &File, until: Option<Instant>) -> io::Result<()> {
    let left = until.map(|t| t.saturating_duration_since(Instant::now()));
    if left.is_some_and(|l| l.is_zero()) {
        return Err(out_of_time(
            "the sink's reader did not take the body in time",
        ));
    }
    let mut fd = libc::pollfd {
        fd: std::os::fd::AsRawFd::as_raw_fd(f),
        events: libc::POLLOUT,
        revents: 0,
    };
    // Rounded up, so that a wait never ends just short of `until` and spins.
    let ms = left.map_or(-1, |l| {
        i32::try_from(l.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
    });
    // SAFETY: one pollfd on a descriptor `f` owns. A signal (EINTR) or a timeout returns to
    // the caller's loop, which writes again or finds `until` passed.
    unsafe { libc::poll(&mut fd, 1, ms) };
    Ok(())
}

/// A sink file's write error, carried through the decoders as what it is (ours, not the
/// body's).
fn sink_error(e: io::Error) -> io::Error {
    io::Error::other(TransportError::new(
        FailureKind::Sink,
        format!("cannot write the sink file: {e}"),
    ))
}

/// `deflate` as servers send it: zlib-wrapped (RFC 9110) or raw, told apart by the first two
/// bytes (a zlib header has compression method 8 and is a multiple of 31), as curl does.
enum Deflate {
    /// Fewer than two bytes seen.
    Undecided(Vec<u8>, Option<Destination>),
    Zlib(flate2::write::ZlibDecoder<Destination>),
    Raw(flate2::write::DeflateDecoder<Destination>),
}

impl Deflate {
    /// Picks the decoder from the bytes seen and hands them to it.
    fn decide(&mut self) -> io::Result<()> {
        let Deflate::Undecided(head, destination) = self else {
            return Ok(());
        };
        let head = std::mem::take(head);
        let Some(destination) = destination.take() else {
            return Ok(());
        };
        let zlib = match head.as_slice() {
            [cmf, flg, ..] => cmf & 0x0f == 8 && (u16::from(*cmf) << 8 | u16::from(*flg)) % 31 == 0,
            _ => true,
        };
        *self = if zlib {
            Deflate::Zlib(flate2::write::ZlibDecoder::new(destination))
        } else {
            Deflate::Raw(flate2::write::DeflateDecoder::new(destination))
        };
        self.write_all(&head)
    }
}

impl Write for Deflate {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Deflate::Undecided(head, _) => {
                let take = (2 - head.len()).min(buf.len());
                head.extend_from_slice(&buf[..take]);
                if head.len() == 2 {
                    self.decide()?;
                }
                Ok(take)
            }
            Deflate::Zlib(d) => d.write(buf),
            Deflate::Raw(d) => d.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Deflate::Undecided(..) => Ok(()),
            Deflate::Zlib(d) => d.flush(),
            Deflate::Raw(d) => d.flush(),
        }
    }
}

impl Finish for Deflate {
    fn finish(mut self: Box<Self>) -> io::Result<Vec<u8>> {
        self.decide()?;
        match *self {
            Deflate::Zlib(d) => Box::new(d.finish()?).finish(),
            Deflate::Raw(d) => Box::new(d.finish()?).finish(),
            Deflate::Undecided(..) => Ok(Vec::new()),
        }
    }
}

/// A writer that ends with the body: flushes decoders, checks the stream was complete.
trait Finish: Write + Send {
    fn finish(self: Box<Self>) -> io::Result<Vec<u8>>;
}

impl Finish for Destination {
    fn finish(self: Box<Self>) -> io::Result<Vec<u8>> {
        match *self {
            Destination::Memory(b, _) => Ok(b.into_vec()),
            Destination::File(mut f, _) => f.flush().map(|()| Vec::new()),
        }
    }
}

impl Finish for flate2::write::MultiGzDecoder<Destination> {
    fn finish(self: Box<Self>) -> io::Result<Vec<u8>> {
        Box::new((*self).finish()?).finish()
    }
}

impl Finish for brotli_decompressor::DecompressorWriter<Destination> {
    fn finish(self: Box<Self>) -> io::Result<Vec<u8>> {
        match (*self).into_inner() {
            Ok(destination) => Box::new(destination).finish(),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the br stream ended early",
            )),
        }
    }
}

/// A `max_body` or sink error keeps its kind; anything else comes from a decoder.
fn transport_error(e: io::Error) -> TransportError {
    let detail = e.to_string();
    match e
        .into_inner()
        .map(|inner| inner.downcast::<TransportError>())
    {
        Some(Ok(error)) => *error,
        _ => TransportError::new(
            FailureKind::Decode,
            format!("cannot decode the response body: {detail}"),
        ),
    }
}

/// Opens (creates or truncates) a sink file without waiting: a FIFO that lost its reader since
/// the option was checked fails (ENXIO) instead of holding the runtime past every deadline.
/// It stays non-blocking: a FIFO's reader paces the writes within the attempt's timeout
/// ([`wait_writable`]); a regular file ignores the flag.
fn create_sink(path: &std::path::Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::write::GzEncoder;
    use flate2::Compression;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = GzEncoder::new(Vec::new(), Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn headers() -> Vec<(String, Vec<u8>)> {
        vec![
            ("content-encoding".into(), b"gzip".to_vec()),
            ("content-length".into(), b"10".to_vec()),
        ]
    }

    #[test]
    fn gzip_is_decoded_and_its_headers_renamed() {
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let mut h = headers();
        let mut body = ResponseBody::start(&target, &mut h, Some(10), 1000).unwrap();
        for chunk in gzip(b"hello hello hello").chunks(3) {
            body.push(chunk).unwrap();
        }
        assert_eq!(body.finish().unwrap(), b"hello hello hello");
        assert_eq!(h[0].0, "x-encoded-content-encoding");
        assert_eq!(h[1].0, "x-encoded-content-length");
    }

    #[test]
    fn a_bomb_stops_at_max_body_of_the_decoded_size() {
        let bomb = gzip(&vec![0u8; 50_000_000]);
        assert!(bomb.len() < 100_000);
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let mut body = ResponseBody::start(&target, &mut headers(), None, 1_000_000).unwrap();
        let error = bomb
            .chunks(16 * 1024)
            .find_map(|chunk| body.push(chunk).err())
            .expect("the limit stops it");
        assert_eq!(error.kind, FailureKind::TooLarge);
    }

    #[test]
    fn without_decode_content_the_bytes_are_kept_as_received() {
        let packed = gzip(b"x");
        let mut h = headers();
        let mut body = ResponseBody::start(&BodyTarget::default(), &mut h, None, 1000).unwrap();
        body.push(&packed).unwrap();
        assert_eq!(body.finish().unwrap(), packed);
        assert_eq!(h[0].0, "content-encoding");
    }

    #[test]
    fn a_sink_receives_the_body_and_memory_keeps_nothing() {
        let path = std::env::temp_dir().join(format!("resilient-sink-{}", std::process::id()));
        let target = BodyTarget {
            decode: false,
            sink: Some(path.clone()),
            ..Default::default()
        };
        let mut body = ResponseBody::start(&target, &mut Vec::new(), Some(6), 1).unwrap();
        body.push(b"abc").unwrap();
        body.push(b"def").unwrap();
        assert!(body.finish().unwrap().is_empty());
        assert_eq!(std::fs::read(&path).unwrap(), b"abcdef");
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn an_empty_body_marked_gzip_is_empty() {
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let body = ResponseBody::start(&target, &mut headers(), Some(0), 1000).unwrap();
        assert_eq!(body.finish().unwrap(), b"");
    }

    #[test]
    fn a_truncated_gzip_stream_is_a_body_error_that_may_be_retried() {
        let packed = gzip(b"hello world");
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let mut body = ResponseBody::start(&target, &mut headers(), None, 1000).unwrap();
        body.push(&packed[..packed.len() - 6]).unwrap();
        let e = body.finish().unwrap_err();
        assert_eq!(e.kind, FailureKind::Body);
        assert!(e.kind.is_transient());
    }

    /// A body the response framed (`Content-Length: 2`, chunked) arrived whole: a stream too
    /// short to decode is what the server sends, not a cut transfer. Not retried.
    #[test]
    fn a_whole_body_too_short_to_decode_is_a_decode_error() {
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let whole = |h: &mut Vec<(String, Vec<u8>)>, length: Option<u64>, bytes: &[u8]| {
            let mut body = ResponseBody::start(&target, h, length, 1000).unwrap();
            body.push(bytes).and_then(|()| body.finish())
        };
        // Too short for a gzip header, and a gzip header cut short (both wait for finish).
        let cut = &gzip(b"hello")[..8];
        for (encoding, bytes) in [
            (b"gzip".as_slice(), &b"\x1f"[..]),
            (b"gzip", cut),
            (b"br", b"\x0b"),
        ] {
            let mut h = vec![("content-encoding".to_string(), encoding.to_vec())];
            let e = whole(&mut h, Some(bytes.len() as u64), bytes).unwrap_err();
            assert_eq!(e.kind, FailureKind::Decode, "{e:?}");
            let mut h = vec![
                ("content-encoding".to_string(), encoding.to_vec()),
                ("transfer-encoding".to_string(), b"chunked".to_vec()),
            ];
            assert_eq!(
                whole(&mut h, None, bytes).unwrap_err().kind,
                FailureKind::Decode
            );
            // Read until the connection closed: the same bytes may be a cut transfer.
            let mut h = vec![("content-encoding".to_string(), encoding.to_vec())];
            assert_eq!(
                whole(&mut h, None, bytes).unwrap_err().kind,
                FailureKind::Body
            );
        }
    }

    fn decoded(encoding: &[u8], chunks: &[&[u8]]) -> Result<Vec<u8>, TransportError> {
        let target = BodyTarget {
            decode: true,
            sink: None,
            ..Default::default()
        };
        let mut h = vec![("content-encoding".to_string(), encoding.to_vec())];
        let mut body = ResponseBody::start(&target, &mut h, None, 1 << 20)?;
        for chunk in chunks {
            body.push(chunk)?;
        }
        body.finish()
    }

    #[test]
    fn concatenated_gzip_members_are_decoded_one_after_the_other() {
        let (a, b) = (gzip(b"hello "), gzip(b"world"));
        assert_eq!(decoded(b"gzip", &[&a, &b]).unwrap(), b"hello world");
    }

    #[test]
    fn deflate_is_decoded_zlib_wrapped_or_raw() {
        use flate2::write::{DeflateEncoder, ZlibEncoder};
        let mut z = ZlibEncoder::new(Vec::new(), Compression::default());
        z.write_all(b"zlib body").unwrap();
        let z = z.finish().unwrap();
        let mut r = DeflateEncoder::new(Vec::new(), Compression::default());
        r.write_all(b"raw body").unwrap();
        let r = r.finish().unwrap();
        // Byte by byte too: the choice waits for two bytes.
        let bytes: Vec<&[u8]> = z.chunks(1).collect();
        assert_eq!(decoded(b"deflate", &bytes).unwrap(), b"zlib body");
        assert_eq!(decoded(b"deflate", &[&r]).unwrap(), b"raw body");
    }

    #[test]
    fn a_body_that_cannot_be_decoded_is_a_decode_error_never_retried() {
        for (encoding, body) in [
            (b"gzip".as_slice(), b"this is not gzip".as_slice()),
            (b"deflate", b"\xff\xff not deflate"),
            (b"br", b"not brotli at all, not brotli at all"),
        ] {
            let e = decoded(encoding, &[body]).unwrap_err();
            assert_eq!(
                e.kind,
                FailureKind::Decode,
                "{}",
                String::from_utf8_lossy(encoding)
            );
            assert!(!e.kind.is_transient());
        }
    }

    /// 64 MB of zeros in 64 KB of gzip, into a sink and into memory, for an attempt that ends
    /// 2 ms in (decoding it all takes far longer): the writes stop there, and the attempt times
    /// out. Before, the whole chunk was decoded into the sink whatever the time (4 GiB over 8 s
    /// of a 0.5 s timeout).
    #[test]
    fn a_body_decoded_past_the_attempts_end_stops_there() {
        let bomb = {
            let mut e = GzEncoder::new(Vec::new(), Compression::fast());
            for _ in 0..1024 {
                e.write_all(&[0u8; 64 * 1024]).unwrap();
            }
            e.finish().unwrap()
        };
        let sink = std::env::temp_dir().join(format!("resilient-bomb-{}.bin", std::process::id()));
        for sink in [Some(sink.clone()), None] {
            let target = BodyTarget {
                decode: true,
                sink: sink.clone(),
                write_until: Some(Instant::now() + std::time::Duration::from_millis(2)),
            };
            let mut h = vec![("content-encoding".to_string(), b"gzip".to_vec())];
            let mut body = ResponseBody::start(&target, &mut h, None, 1 << 30).unwrap();
            let e = body.push(&bomb).unwrap_err();
            assert_eq!(e.kind, FailureKind::Timeout, "{sink:?}: {}", e.detail);
            assert!(e.kind.is_transient());
            if let Some(path) = &sink {
                let written = std::fs::metadata(path).unwrap().len();
                assert!(
                    written < 64 << 20,
                    "stopped before the end: {written} bytes"
                );
                std::fs::remove_file(path).unwrap();
            }
        }
    }

    #[test]
    fn a_sink_that_cannot_be_created_is_a_sink_error_never_retried() {
        let target = BodyTarget {
            decode: false,
            sink: Some("/proc/self/resilient-sink".into()),
            ..Default::default()
        };
        let e = ResponseBody::start(&target, &mut Vec::new(), None, 1)
            .err()
            .expect("cannot be created");
        assert_eq!(e.kind, FailureKind::Sink);
        assert!(!e.kind.is_transient());
        assert!(
            e.detail.contains("/proc/self/resilient-sink"),
            "{}",
            e.detail
        );
    }
}
