//! Where a response body goes as it arrives: decoded (gzip, deflate, br) or not, into a
//! [`BodyBuffer`] bounded by `max_body`, or into a file (`sink`).
//!
//! Decoding happens chunk by chunk into the bounded buffer, so `max_body` bounds the *decoded*
//! size: a decompression bomb stops at the limit, never inflating beyond it. When a body is
//! decoded, its `Content-Encoding` and `Content-Length` headers are renamed
//! `X-Encoded-Content-Encoding` / `X-Encoded-Content-Length` (they describe bytes the caller
//! never sees), as Guzzle does. A sink file is truncated at the start of every attempt; its
//! writes are bounded by the attempt's timeout, not by `max_body`.

use std::fs::File;
use std::io::{self, Write};

use crate::body_limit::BodyBuffer;
use crate::transport::{FailureKind, TransportError};
use crate::transport_options::BodyTarget;

/// A body being received.
pub struct ResponseBody {
    writer: Box<dyn Finish>,
    /// Bytes received so far (encoded): an empty body is empty whatever its encoding says
    /// (HEAD, 204, 304, an empty 200 marked gzip), never an incomplete stream.
    received: u64,
}

impl ResponseBody {
    /// Starts receiving the body of a response with these headers (renamed when decoding).
    pub fn start(
        target: &BodyTarget,
        headers: &mut [(String, Vec<u8>)],
        content_length: Option<u64>,
        max_body: u64,
    ) -> Result<Self, TransportError> {
        let encoding = if target.decode {
            Encoding::of(headers)
        } else {
            None
        };
        let destination = match &target.sink {
            Some(path) => Destination::File(File::create(path).map_err(|e| {
                TransportError::new(
                    FailureKind::Other,
                    format!("cannot write the sink file {}: {e}", path.display()),
                )
            })?),
            None => {
                // The announced length is the encoded one: with decoding, only the decoded size
                // counts (checked as it grows).
                let announced = if encoding.is_some() {
                    None
                } else {
                    content_length
                };
                Destination::Memory(BodyBuffer::new(announced, max_body)?)
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
                    Encoding::Gzip => Box::new(flate2::write::GzDecoder::new(destination)),
                    Encoding::Deflate => Box::new(flate2::write::ZlibDecoder::new(destination)),
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
        })
    }

    pub fn push(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        self.received += chunk.len() as u64;
        self.writer.write_all(chunk).map_err(transport_error)
    }

    /// The body kept in memory (empty when it went to a sink).
    pub fn finish(self) -> Result<Vec<u8>, TransportError> {
        if self.received == 0 {
            return Ok(Vec::new());
        }
        self.writer.finish().map_err(transport_error)
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

enum Destination {
    Memory(BodyBuffer),
    File(File),
}

impl Write for Destination {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Destination::Memory(b) => b.push(buf).map(|()| buf.len()).map_err(io::Error::other),
            Destination::File(f) => f.write(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            Destination::Memory(_) => Ok(()),
            Destination::File(f) => f.flush(),
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
            Destination::Memory(b) => Ok(b.into_vec()),
            Destination::File(mut f) => f.flush().map(|()| Vec::new()),
        }
    }
}

impl Finish for flate2::write::GzDecoder<Destination> {
    fn finish(self: Box<Self>) -> io::Result<Vec<u8>> {
        Box::new((*self).finish()?).finish()
    }
}

impl Finish for flate2::write::ZlibDecoder<Destination> {
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

/// A `max_body` error keeps its kind; a decoding or file error is a body error.
fn transport_error(e: io::Error) -> TransportError {
    let detail = e.to_string();
    match e
        .into_inner()
        .map(|inner| inner.downcast::<TransportError>())
    {
        Some(Ok(error)) => *error,
        _ => TransportError::new(
            FailureKind::Body,
            format!("cannot decode or store the response body: {detail}"),
        ),
    }
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
        };
        let body = ResponseBody::start(&target, &mut headers(), Some(0), 1000).unwrap();
        assert_eq!(body.finish().unwrap(), b"");
    }

    #[test]
    fn a_truncated_gzip_stream_is_a_body_error() {
        let packed = gzip(b"hello world");
        let target = BodyTarget {
            decode: true,
            sink: None,
        };
        let mut body = ResponseBody::start(&target, &mut headers(), None, 1000).unwrap();
        body.push(&packed[..packed.len() - 6]).unwrap();
        assert_eq!(body.finish().unwrap_err().kind, FailureKind::Body);
    }
}
