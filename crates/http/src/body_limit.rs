//! A response body buffer that never grows past `max_body`.
//!
//! Why: a body is held whole in Rust memory, outside PHP's `memory_limit`; a 300 MB answer or
//! an endless chunked stream would otherwise take the worker's memory with it. Both transports
//! read chunk by chunk into a [`BodyBuffer`]: a `Content-Length` above the limit fails before
//! anything is read, the preallocation from `Content-Length` is capped by the limit, growth
//! never reserves beyond it, and the first chunk that would cross it ends the attempt with
//! [`FailureKind::TooLarge`] (the transport then drops, i.e. closes, the connection).

use crate::transport::{FailureKind, TransportError};

/// The first allocation when the length is unknown (chunked bodies).
const INITIAL: usize = 16 * 1024;

/// The body read so far, bounded by `max`.
pub struct BodyBuffer {
    buf: Vec<u8>,
    max: u64,
}

impl BodyBuffer {
    /// Starts a body announced as `content_length` bytes (if known); fails at once when the
    /// announcement alone is over the limit.
    pub fn new(content_length: Option<u64>, max: u64) -> Result<Self, TransportError> {
        if let Some(len) = content_length {
            if len > max {
                return Err(too_large(max, Some(len)));
            }
        }
        let capacity = content_length.unwrap_or(INITIAL as u64).min(max);
        Ok(Self {
            buf: Vec::with_capacity(usize::try_from(capacity).unwrap_or(INITIAL)),
            max,
        })
    }

    /// Appends a chunk, or fails when the body would exceed the limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        let total = self.buf.len() as u64 + chunk.len() as u64;
        if total > self.max {
            return Err(too_large(self.max, None));
        }
        if total as usize > self.buf.capacity() {
            // Double, but never reserve beyond the limit.
            let target = (self.buf.capacity() as u64 * 2).max(total).min(self.max);
            self.buf.reserve_exact(target as usize - self.buf.len());
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

/// The `max_body` error; its detail names the limit.
fn too_large(max: u64, announced: Option<u64>) -> TransportError {
    let detail = match announced {
        Some(len) => format!(
            "the response announced {len} bytes (Content-Length), more than max_body ({max} bytes); not read, connection closed"
        ),
        None => format!(
            "the response body exceeds max_body ({max} bytes); reading stopped, connection closed"
        ),
    };
    TransportError::new(FailureKind::TooLarge, detail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_up_to_the_limit_is_kept_whole() {
        let mut b = BodyBuffer::new(None, 10).unwrap();
        b.push(b"12345").unwrap();
        b.push(b"67890").unwrap();
        assert_eq!(b.into_vec(), b"1234567890");
    }

    #[test]
    fn one_byte_over_fails_and_never_reserves_beyond_the_limit() {
        let mut b = BodyBuffer::new(None, 100_000).unwrap();
        for _ in 0..99 {
            b.push(&[0u8; 1000]).unwrap();
            assert!(b.buf.capacity() <= 100_000);
        }
        b.push(&[0u8; 1000]).unwrap();
        let e = b.push(b"x").unwrap_err();
        assert_eq!(e.kind, FailureKind::TooLarge);
        assert!(e.detail.contains("max_body (100000 bytes)"), "{}", e.detail);
    }

    #[test]
    fn a_content_length_over_the_limit_fails_before_reading_and_preallocation_is_capped() {
        let e = BodyBuffer::new(Some(300_000_000), 1000).err().unwrap();
        assert_eq!(e.kind, FailureKind::TooLarge);
        assert!(e.detail.contains("300000000"), "{}", e.detail);
        let b = BodyBuffer::new(Some(1000), 1000).unwrap();
        assert!(b.buf.capacity() >= 1000 && b.buf.capacity() < 2000);
    }
}
