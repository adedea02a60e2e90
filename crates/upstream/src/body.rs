//! Response bodies: a whole body at once, a slow "drip" that sends small chunks with pauses, or
//! a generated stream of any size (endless too) that is never held in memory.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use http_body_util::{Either, Full};
use hyper::body::{Body, Bytes, Frame, SizeHint};
use hyper::http::{header, HeaderValue, Response, StatusCode};
use tokio::time::Sleep;

use crate::recorder::{AttemptGuard, Outcome};

/// Every response this server sends.
pub type OutBody = Either<Full<Bytes>, Either<DripBody, StreamBody>>;

/// The connection is closed without a response (hyper closes it when the service errs).
#[derive(Debug)]
pub struct CloseConnection;

impl std::fmt::Display for CloseConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection closed on purpose")
    }
}

impl std::error::Error for CloseConnection {}

/// What a handler returns.
pub type HandlerResult = Result<Response<OutBody>, CloseConnection>;

/// A complete body.
pub fn full(bytes: impl Into<Bytes>) -> OutBody {
    Either::Left(Full::new(bytes.into()))
}

/// A JSON response.
pub fn json(status: StatusCode, value: &impl serde::Serialize) -> Response<OutBody> {
    let bytes = serde_json::to_vec(value).unwrap_or_else(|_| b"null".to_vec());
    with_type(status, "application/json", bytes)
}

/// A JSON `{"error": message}` response.
pub fn error(status: StatusCode, message: impl Into<String>) -> Response<OutBody> {
    json(status, &serde_json::json!({ "error": message.into() }))
}

/// A response with a body and content type.
pub fn with_type(
    status: StatusCode,
    content_type: &'static str,
    bytes: impl Into<Bytes>,
) -> Response<OutBody> {
    let mut r = Response::new(full(bytes));
    *r.status_mut() = status;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    r
}

/// A body sent `chunk` bytes at a time with `interval` before each chunk. It owns the
/// request's guard: the row is `answered` when the last chunk goes out, `abandoned` if hyper
/// drops the body first (the client left).
pub struct DripBody {
    data: Bytes,
    chunk: usize,
    interval: Duration,
    sleep: Pin<Box<Sleep>>,
    guard: Option<(AttemptGuard, u16)>,
}

impl DripBody {
    pub fn new(
        data: Bytes,
        chunk: usize,
        interval: Duration,
        guard: AttemptGuard,
        status: u16,
    ) -> Self {
        DripBody {
            data,
            chunk: chunk.max(1),
            interval,
            sleep: Box::pin(tokio::time::sleep(interval)),
            guard: Some((guard, status)),
        }
    }

    fn finish(&mut self) {
        if let Some((g, status)) = self.guard.take() {
            g.finish(Outcome::Answered, Some(status));
        }
    }
}

impl Body for DripBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.data.is_empty() {
            this.finish();
            return Poll::Ready(None);
        }
        if this.sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        let next = tokio::time::Instant::now() + this.interval;
        this.sleep.as_mut().reset(next);
        let n = this.chunk.min(this.data.len());
        let chunk = this.data.split_to(n);
        if this.data.is_empty() {
            this.finish();
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        // Never claim to be done early: hyper would drop the body (and the guard) unpolled.
        self.data.is_empty() && self.guard.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.len() as u64)
    }
}

/// Bytes per generated chunk.
const STREAM_CHUNK: usize = 64 * 1024;

/// A generated body: `bytes` bytes of `x` (sent with `Content-Length`), or with `bytes` absent
/// an endless chunked stream, as fast as the client reads. Owns the request's guard like
/// [`DripBody`]: `answered` at the end, `abandoned` when the client leaves first.
pub struct StreamBody {
    remaining: Option<u64>,
    chunked: bool,
    chunk: Bytes,
    guard: Option<(AttemptGuard, u16)>,
}

impl StreamBody {
    pub fn new(bytes: Option<u64>, chunked: bool, guard: AttemptGuard, status: u16) -> Self {
        StreamBody {
            remaining: bytes,
            chunked: chunked || bytes.is_none(),
            chunk: Bytes::from(vec![b'x'; STREAM_CHUNK]),
            guard: Some((guard, status)),
        }
    }
}

impl Body for StreamBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        let n = match this.remaining {
            Some(0) => {
                if let Some((g, status)) = this.guard.take() {
                    g.finish(Outcome::Answered, Some(status));
                }
                return Poll::Ready(None);
            }
            Some(left) => {
                let n = left.min(STREAM_CHUNK as u64);
                this.remaining = Some(left - n);
                n as usize
            }
            None => STREAM_CHUNK,
        };
        Poll::Ready(Some(Ok(Frame::data(this.chunk.slice(..n)))))
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == Some(0) && self.guard.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        match (self.remaining, self.chunked) {
            (Some(n), false) => SizeHint::with_exact(n),
            _ => SizeHint::default(),
        }
    }
}
