//! A response body buffer that never grows past `max_body`.
//!
//! Why: a body is held whole in Rust memory, outside PHP's `memory_limit`; a 300 MB answer or
//! an endless chunked stream would otherwise take the worker's memory with it. Both transports
//! read chunk by chunk into a [`BodyBuffer`]: a `Content-Length` above the limit fails before
//! anything is read, the preallocation from `Content-Length` is capped by the limit, growth
//! never reserves beyond it, and the first chunk that would cross it ends the attempt with
//! [`FailureKind::TooLarge`] (the transport then drops, i.e. closes, the connection).
//!
//! The bodies of one PHP call, or of every request of one pool, also share one
//! [`SharedBodyLimit`] (`body_memory.rs`): what PHP's `memory_limit` leaves.

use std::sync::Arc;

use crate::body_memory::{BodyLimit, SharedBodyLimit};
use crate::transport::{FailureKind, TransportError};

/// The first allocation when the length is unknown (chunked bodies).
const INITIAL: usize = 16 * 1024;

/// The body read so far, bounded by `max` and by the shared limit.
pub struct BodyBuffer {
    buf: Vec<u8>,
    max: u64,
    shared: Option<Arc<SharedBodyLimit>>,
    /// Taken from `shared` for this body (≥ `buf.len()`), given back on drop.
    reserved: u64,
}

impl BodyBuffer {
    /// Starts a body announced as `content_length` bytes (if known); fails at once when the
    /// announcement alone is over a limit.
    pub fn new(content_length: Option<u64>, limit: BodyLimit) -> Result<Self, TransportError> {
        let BodyLimit { max, shared } = limit;
        let mut body = Self {
            buf: Vec::new(),
            max,
            shared,
            reserved: 0,
        };
        if let Some(len) = content_length {
            if len > max {
                return Err(body.over_max(Some(len)));
            }
            body.reserve_up_to(len, Some(len))?;
        }
        let capacity = content_length.unwrap_or(INITIAL as u64).min(max);
        body.buf = Vec::with_capacity(usize::try_from(capacity).unwrap_or(INITIAL));
        Ok(body)
    }

    /// Appends a chunk, or fails when the body would exceed a limit.
    pub fn push(&mut self, chunk: &[u8]) -> Result<(), TransportError> {
        let total = self.buf.len() as u64 + chunk.len() as u64;
        if total > self.max {
            return Err(self.over_max(None));
        }
        self.reserve_up_to(total, None)?;
        if total as usize > self.buf.capacity() {
            // Double, but never reserve beyond the limit.
            let target = (self.buf.capacity() as u64 * 2).max(total).min(self.max);
            self.buf.reserve_exact(target as usize - self.buf.len());
        }
        self.buf.extend_from_slice(chunk);
        Ok(())
    }

    /// The error for a body over `max`: what memory_limit leaves when that is what set it
    /// (below max_body), else max_body.
    fn over_max(&self, announced: Option<u64>) -> TransportError {
        match &self.shared {
            Some(shared) if shared.limit() == self.max => too_large_together(shared, announced),
            _ => too_large(self.max, announced),
        }
    }

    /// Makes this body's reservation in the shared limit `total` bytes.
    fn reserve_up_to(&mut self, total: u64, announced: Option<u64>) -> Result<(), TransportError> {
        if let Some(shared) = &self.shared {
            if total > self.reserved {
                if !shared.reserve(total - self.reserved) {
                    return Err(too_large_together(shared, announced));
                }
                self.reserved = total;
            }
        }
        Ok(())
    }

    /// The body; its bytes stay reserved in the shared limit (the caller gives them back if it
    /// throws the body away).
    pub fn into_vec(mut self) -> Vec<u8> {
        self.reserved = 0;
        std::mem::take(&mut self.buf)
    }
}

impl Drop for BodyBuffer {
    fn drop(&mut self) {
        if let Some(shared) = &self.shared {
            shared.give_back(self.reserved);
        }
    }
}

/// The shared limit's error.
fn too_large_together(shared: &SharedBodyLimit, announced: Option<u64>) -> TransportError {
    let (what, end) = match announced {
        Some(len) => (
            format!("the response announced {len} bytes (Content-Length)"),
            "not read",
        ),
        None => ("the response body grew".to_owned(), "reading stopped"),
    };
    TransportError::new(
        FailureKind::TooLarge,
        format!(
            "{what}; with the other bodies this call or pool holds, more than memory_limit leaves ({} bytes); {end}, connection closed",
            shared.limit()
        ),
    )
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
        let mut b = BodyBuffer::new(None, 10.into()).unwrap();
        b.push(b"12345").unwrap();
        b.push(b"67890").unwrap();
        assert_eq!(b.into_vec(), b"1234567890");
    }

    #[test]
    fn one_byte_over_fails_and_never_reserves_beyond_the_limit() {
        let mut b = BodyBuffer::new(None, 100_000.into()).unwrap();
        for _ in 0..99 {
            b.push(&[0u8; 1000]).unwrap();
            assert!(b.buf.capacity() <= 100_000);
        }
        b.push(&[0u8; 1000]).unwrap();
        let e = b.push(b"x").unwrap_err();
        assert_eq!(e.kind, FailureKind::TooLarge);
        assert!(e.detail.contains("max_body (100000 bytes)"), "{}", e.detail);
    }

    fn shared(max: u64, shared: &Arc<SharedBodyLimit>) -> BodyLimit {
        BodyLimit {
            max,
            shared: Some(shared.clone()),
        }
    }

    /// When what memory_limit leaves is below max_body it is the body's max: a body over it is
    /// said to be over that, not over "max_body (0 bytes)".
    #[test]
    fn a_max_set_by_memory_names_memory() {
        let nothing_left = SharedBodyLimit::new(0);
        for e in [
            BodyBuffer::new(Some(10), shared(0, &nothing_left))
                .err()
                .unwrap(),
            BodyBuffer::new(None, shared(0, &nothing_left))
                .unwrap()
                .push(b"x")
                .unwrap_err(),
        ] {
            assert_eq!(e.kind, FailureKind::TooLarge);
            assert!(
                e.detail.contains("more than memory_limit leaves (0 bytes)"),
                "{}",
                e.detail
            );
            assert!(!e.detail.contains("max_body"), "{}", e.detail);
        }
    }

    #[test]
    fn bodies_sharing_a_limit_stay_within_it_together() {
        let together = SharedBodyLimit::new(1000);
        let mut a = BodyBuffer::new(None, shared(800, &together)).unwrap();
        let mut b = BodyBuffer::new(None, shared(800, &together)).unwrap();
        a.push(&[1; 600]).unwrap();
        b.push(&[2; 300]).unwrap();
        assert_eq!(together.held(), 900);
        let e = b.push(&[2; 200]).unwrap_err();
        assert_eq!(e.kind, FailureKind::TooLarge);
        assert!(
            e.detail
                .contains("more than memory_limit leaves (1000 bytes)"),
            "{}",
            e.detail
        );
        // A body that failed gives its bytes back; one kept keeps them.
        drop(b);
        assert_eq!(together.held(), 600);
        let kept = a.into_vec();
        assert_eq!((kept.len(), together.held()), (600, 600));
        // An announcement over what is left fails before anything is read.
        let e = BodyBuffer::new(Some(500), shared(800, &together))
            .err()
            .unwrap();
        assert!(e.detail.contains("announced 500 bytes"), "{}", e.detail);
        assert_eq!(together.held(), 600);
        let c = BodyBuffer::new(Some(400), shared(800, &together)).unwrap();
        assert_eq!(together.held(), 1000);
        drop(c);
        together.give_back(kept.len() as u64);
        assert_eq!(together.held(), 0);
    }

    #[test]
    fn a_content_length_over_the_limit_fails_before_reading_and_preallocation_is_capped() {
        let e = BodyBuffer::new(Some(300_000_000), 1000.into())
            .err()
            .unwrap();
        assert_eq!(e.kind, FailureKind::TooLarge);
        assert!(e.detail.contains("300000000"), "{}", e.detail);
        let b = BodyBuffer::new(Some(1000), 1000.into()).unwrap();
        assert!(b.buf.capacity() >= 1000 && b.buf.capacity() < 2000);
    }
}
