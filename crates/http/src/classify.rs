//! The classifier: is an outcome a final answer, or transient (worth another attempt)?
//!
//! Seed 004: connection errors, timeouts, 429 and 503 are transient; other 4xx never are (the
//! request itself is wrong). Any status not in `retry_on` is the caller's answer to inspect, as
//! with Laravel's client. Whether a transient outcome may actually be retried also depends on
//! the method: POST and PATCH are not idempotent, so they are retried only with an
//! idempotency key (the server can then deduplicate).

use reqwest::Method;

use crate::transport::{FailureKind, RawResponse, TransportError};

/// The classifier's verdict on one attempt's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A final answer: return it to the caller, whatever the status.
    Final,
    /// A transient status (in `retry_on`).
    TransientStatus(u16),
    /// No answer: connection error, timeout, closed connection.
    TransientFailure(FailureKind),
    /// No answer, and sending again would not help: the body exceeded `max_body`, TLS refused
    /// the server, too many redirects.
    FatalFailure(FailureKind),
}

impl Verdict {
    pub fn is_transient(self) -> bool {
        matches!(
            self,
            Verdict::TransientStatus(_) | Verdict::TransientFailure(_)
        )
    }
}

/// Classifies one attempt's outcome.
pub fn classify(outcome: &Result<RawResponse, TransportError>, retry_on: &[u16]) -> Verdict {
    match outcome {
        Ok(response) if retry_on.contains(&response.status) => {
            Verdict::TransientStatus(response.status)
        }
        Ok(_) => Verdict::Final,
        Err(error) if !error.kind.is_transient() => Verdict::FatalFailure(error.kind),
        Err(error) => Verdict::TransientFailure(error.kind),
    }
}

/// Whether a request with this method may be sent again. GET, HEAD, OPTIONS, PUT, DELETE and
/// TRACE are idempotent by definition (RFC 9110 §9.2.2); anything else (POST, PATCH, custom
/// methods) only with an idempotency key.
pub fn may_retry(method: &Method, has_idempotency_key: bool) -> bool {
    has_idempotency_key || is_idempotent(method)
}

/// RFC 9110 idempotent methods.
pub fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(s: u16) -> Result<RawResponse, TransportError> {
        Ok(RawResponse {
            status: s,
            headers: vec![],
            body: vec![],
        })
    }

    #[test]
    fn default_retry_on_statuses_are_transient_everything_else_final() {
        let retry_on = [429, 503];
        assert_eq!(
            classify(&status(429), &retry_on),
            Verdict::TransientStatus(429)
        );
        assert_eq!(
            classify(&status(503), &retry_on),
            Verdict::TransientStatus(503)
        );
        for s in [
            200, 201, 204, 301, 400, 401, 403, 404, 409, 422, 500, 502, 504,
        ] {
            assert_eq!(classify(&status(s), &retry_on), Verdict::Final, "{s}");
        }
        assert_eq!(
            classify(&status(500), &[500]),
            Verdict::TransientStatus(500)
        );
    }

    #[test]
    fn failures_are_transient() {
        for kind in [
            FailureKind::Timeout,
            FailureKind::Connect,
            FailureKind::Closed,
            FailureKind::Body,
            FailureKind::Other,
        ] {
            let v = classify(&Err(TransportError::new(kind, "x")), &[]);
            assert_eq!(v, Verdict::TransientFailure(kind));
            assert!(v.is_transient());
        }
        // Ours, or the same again whatever is sent: never retried.
        for kind in [
            FailureKind::TooLarge,
            FailureKind::Tls,
            FailureKind::Redirects,
            FailureKind::Decode,
            FailureKind::Sink,
            FailureKind::Request,
        ] {
            let v = classify(&Err(TransportError::new(kind, "x")), &[]);
            assert_eq!(v, Verdict::FatalFailure(kind));
        }
        assert!(FailureKind::Request.is_ours() && FailureKind::Sink.is_ours());
        assert!(!FailureKind::Other.is_ours() && !FailureKind::Timeout.is_ours());
    }

    #[test]
    fn post_and_patch_need_a_key() {
        for m in [
            Method::GET,
            Method::HEAD,
            Method::OPTIONS,
            Method::PUT,
            Method::DELETE,
        ] {
            assert!(may_retry(&m, false), "{m}");
        }
        for m in [
            Method::POST,
            Method::PATCH,
            Method::from_bytes(b"PURGE").unwrap(),
        ] {
            assert!(!may_retry(&m, false), "{m}");
            assert!(may_retry(&m, true), "{m}");
        }
    }
}
