//! The transport: sends one attempt, nothing more.
//!
//! A transport never retries, never follows redirects into retries and never decides anything:
//! it sends the prepared request within the given limits and reports either the upstream's
//! answer (any status) or a failure with a kind. The attempt loop owns every decision. The trait
//! lets the loop run over reqwest in production and over a scripted fake in tests.

use std::fmt;
use std::time::Duration;

use crate::body_memory::BodyLimit;
use crate::clock::BoxFuture;
use crate::request::PreparedRequest;

/// Time limits of one attempt, already cut to the deadline's remainder by the loop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttemptLimits {
    /// Whole attempt: connect, send, and reading the full body.
    pub timeout: Duration,
    /// Connection set-up (DNS, TCP, TLS); never more than `timeout`.
    pub connect_timeout: Duration,
    /// `connect_timeout` as configured, before the deadline cut it: what a transport keeping
    /// clients per connect timeout keys them by (the cut value differs on nearly every call
    /// under a deadline, and a client per value would be a connection per call). At least
    /// `connect_timeout`; the attempt's `timeout` still bounds the whole exchange.
    pub connect_timeout_setting: Duration,
    /// The largest response body accepted, in bytes (`max`), and what the bodies of the whole
    /// call or pool may hold together (`shared`). Enforced while reading: a longer body (or a
    /// `Content-Length` above it) ends the attempt with [`FailureKind::TooLarge`] and closes the
    /// connection; no buffer ever grows beyond it.
    pub body: BodyLimit,
    /// The caller follows redirects (`redirect::follow`): a redirect's body is thrown away, so
    /// it never goes to the sink (a call whose redirect leads nowhere leaves the sink as it was).
    pub follows_redirects: bool,
}

/// An upstream answer as the transport received it, body read in full.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawResponse {
    pub status: u16,
    /// In arrival order; a name may repeat (multi-valued headers). Names are lower case;
    /// values are the bytes as received (not necessarily UTF-8: never rewritten).
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

/// Why an attempt got no answer. Transient for the classifier unless [`FailureKind::is_transient`]
/// says otherwise (too large, TLS, redirects).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// The attempt timeout (or the deadline's remainder) ran out.
    Timeout,
    /// No connection could be made (refused, unreachable, DNS, TLS, connect timeout).
    Connect,
    /// The connection closed or reset before a complete response arrived.
    Closed,
    /// The response body could not be read completely.
    Body,
    /// The response body is larger than `max_body`: the attempt stopped reading and closed the
    /// connection. The only kind that is *not* transient (the same request would get the same
    /// body again).
    TooLarge,
    /// TLS failed: the certificate was refused (unknown CA, wrong host name, expired) or the
    /// handshake failed. Not transient: a certificate does not fix itself between attempts.
    Tls,
    /// More redirects than `allow_redirects.max`, or one to a refused scheme. Not transient.
    Redirects,
    /// The body arrived but its `Content-Encoding` (gzip, deflate, br) could not be decoded.
    /// Not transient: the same request would get the same bytes.
    Decode,
    /// The `sink` file could not be created or written when the answer came: our side, not
    /// the upstream's. Not transient; a file that cannot be written at all is refused with the
    /// option ([`crate::RequestOptions::sink`]), before anything is sent.
    Sink,
    /// The request could not be made, on our side: a multipart part's file that cannot be
    /// opened again (deleted before a retry), a URL the HTTP stack refuses, an HTTP client that
    /// cannot be built, a connect this host lacks the resources for (out of file descriptors,
    /// [`FailureKind::of_connect`]). Not transient, and like `Sink` no outcome of the upstream's.
    Request,
    /// Anything else the transport could not classify.
    Other,
}

impl FailureKind {
    /// The name used in attempt records and messages: `timeout`, `connect`, `closed`, `body`,
    /// `too_large`, `tls`, `redirects`, `decode`, `sink`, `request`, `other`.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Timeout => "timeout",
            FailureKind::Connect => "connect",
            FailureKind::Closed => "closed",
            FailureKind::Body => "body",
            FailureKind::TooLarge => "too_large",
            FailureKind::Tls => "tls",
            FailureKind::Redirects => "redirects",
            FailureKind::Decode => "decode",
            FailureKind::Sink => "sink",
            FailureKind::Request => "request",
            FailureKind::Other => "other",
        }
    }

    /// The kind of a connect that failed with `error`: [`FailureKind::Request`] when this host
    /// lacks what a connection takes (file descriptors, memory, socket buffers), which says
    /// nothing of the upstream: one process leaking descriptors must not open the upstream's
    /// breaker for every process of the host. Otherwise [`FailureKind::Connect`]. (Not
    /// EADDRNOTAVAIL: an IPv6 address of a name on a host without IPv6 fails with it, and is
    /// the error a down upstream's last address reports when `localhost` is also `::1`.)
    pub fn of_connect(error: &std::io::Error) -> FailureKind {
        match error.raw_os_error() {
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM) => {
                FailureKind::Request
            }
            _ => FailureKind::Connect,
        }
    }

    /// Whether the same request may get another outcome when sent again.
    pub fn is_transient(self) -> bool {
        !matches!(
            self,
            FailureKind::TooLarge
                | FailureKind::Tls
                | FailureKind::Redirects
                | FailureKind::Decode
                | FailureKind::Sink
                | FailureKind::Request
        )
    }

    /// A failure of ours, which says nothing about the upstream: no outcome for the guards
    /// (breaker, learned limit) nor the metrics.
    pub fn is_ours(self) -> bool {
        matches!(self, FailureKind::Sink | FailureKind::Request)
    }
}

/// A failed attempt: the kind plus a detail that never contains the URL, headers or body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportError {
    pub kind: FailureKind,
    pub detail: String,
    /// The answer whose body failed (over `max_body`): its status and headers, body empty.
    pub answer: Option<Box<RawResponse>>,
}

impl TransportError {
    pub fn new(kind: FailureKind, detail: impl Into<String>) -> Self {
        Self {
            kind,
            detail: detail.into(),
            answer: None,
        }
    }

    /// This failure came after an answer's status and headers (a body over the limit).
    pub fn answered(mut self, status: u16, headers: &[(String, Vec<u8>)]) -> Self {
        self.answer = Some(Box::new(RawResponse {
            status,
            headers: headers.to_vec(),
            body: Vec::new(),
        }));
        self
    }

    /// The answer this failure came with, without its body, when its status is one the client
    /// retries on (`retry_on`: 429, 503): its status and `Retry-After` decide what follows, not
    /// its body (an outage page over `max_body`). Otherwise the failure itself.
    pub fn into_retryable_answer(mut self, retry_on: &[u16]) -> Result<RawResponse, Self> {
        match self.answer.take() {
            Some(answer) if retry_on.contains(&answer.status) => Ok(*answer),
            answer => {
                self.answer = answer;
                Err(self)
            }
        }
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} error: {}", self.kind.as_str(), self.detail)
    }
}

impl std::error::Error for TransportError {}

/// Sends one attempt. Implementations must honour `limits` and must not retry.
pub trait Transport: Send + Sync {
    fn send(
        &self,
        request: &PreparedRequest,
        limits: AttemptLimits,
    ) -> BoxFuture<'static, Result<RawResponse, TransportError>>;

    /// Whether this request's origin already answered through this transport (a connection,
    /// or what it speaks, is known). A pool lets one request open a cold TLS origin before
    /// fanning out, as curl's `PIPEWAIT` does: over HTTP/2 the rest then share its connection
    /// instead of racing one handshake each.
    fn is_warm(&self, _request: &PreparedRequest) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_over_the_limit_keeps_a_retryable_answer_only() {
        let headers = vec![("retry-after".to_owned(), b"3".to_vec())];
        let over =
            |status| TransportError::new(FailureKind::TooLarge, "x").answered(status, &headers);
        let answer = over(503).into_retryable_answer(&[429, 503]).unwrap();
        assert_eq!(
            (answer.status, answer.headers, answer.body),
            (503, headers.clone(), vec![])
        );
        let failure = over(200).into_retryable_answer(&[429, 503]).unwrap_err();
        assert_eq!(failure.kind, FailureKind::TooLarge);
        assert_eq!(
            failure.answer.map(|a| a.status),
            Some(200),
            "kept as it was"
        );
        let unanswered = TransportError::new(FailureKind::Connect, "x");
        assert!(unanswered.into_retryable_answer(&[503]).is_err());
    }

    #[test]
    fn a_connect_this_host_lacks_the_means_for_is_ours() {
        let kind = |errno| FailureKind::of_connect(&std::io::Error::from_raw_os_error(errno));
        for errno in [libc::EMFILE, libc::ENFILE, libc::ENOBUFS, libc::ENOMEM] {
            assert_eq!(kind(errno), FailureKind::Request, "{errno}");
        }
        // `::1` on a host without IPv6: the upstream's address, not this host's means.
        for errno in [libc::EADDRNOTAVAIL, libc::ECONNREFUSED, libc::ENETUNREACH] {
            assert_eq!(kind(errno), FailureKind::Connect, "{errno}");
        }
    }
}
