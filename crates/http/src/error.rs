//! Why a call could not produce an answer.
//!
//! [`Unavailable`]: the call could not get an answer to return (retryable outcomes exhausted,
//! deadline, funnel full, budget spent, circuit open). Opaque, with predicates, as
//! `reqwest::Error` is: callers ask `is_deadline_exceeded()` instead of matching a public enum,
//! so kinds can grow. It carries the last upstream response when there was one, the attempt
//! count, the last status (0 for a connection error), why the last attempt got no answer (a
//! timeout, a refused connection...) and a message that says why. Messages name
//! the method and the URL without query string or user-info, never header values.

use std::fmt;

use crate::response::Response;
use crate::transport::FailureKind;

/// Why a call is unavailable: the policy's vocabulary. Callers holding an [`Unavailable`] use
/// its predicates instead; new kinds may appear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnavailableKind {
    DeadlineExceeded,
    FunnelFull,
    BudgetExhausted,
    CircuitOpen,
    UpstreamFailed,
}

/// The call could not produce a response to return.
#[derive(Debug, Clone)]
pub struct Unavailable {
    kind: UnavailableKind,
    attempts: u32,
    last_status: u16,
    last_response: Option<Box<Response>>,
    last_failure: Option<FailureKind>,
    message: String,
}

impl Unavailable {
    pub(crate) fn new(
        kind: UnavailableKind,
        attempts: u32,
        last_response: Option<Response>,
        last_failure: Option<FailureKind>,
        message: String,
    ) -> Self {
        let last_status = last_response.as_ref().map_or(0, |r| r.status());
        Self {
            kind,
            attempts,
            last_status,
            last_response: last_response.map(Box::new),
            last_failure,
            message,
        }
    }

    /// `request` could not be sent at all: this process lacks what every request needs (its
    /// I/O runtime did not start, `why`: out of file descriptors, of memory). The upstream's
    /// failure in kind, as a connect this host lacks the resources for is, with the failure
    /// `request` (ours: no outcome for the guards or the metrics), and no attempt.
    pub fn not_sent(request: &crate::request::PreparedRequest, why: &str) -> Self {
        let failure = crate::transport::TransportError::new(FailureKind::Request, why);
        let message = format!(
            "{} {}: request error; not sent (0 attempts) [{failure}]",
            request.method,
            request.display_url(),
        );
        Self::new(
            UnavailableKind::UpstreamFailed,
            0,
            None,
            Some(FailureKind::Request),
            message,
        )
    }

    /// The deadline (the option's or an enclosing one) left no room for an attempt or a wait.
    pub fn is_deadline_exceeded(&self) -> bool {
        self.kind == UnavailableKind::DeadlineExceeded
    }
    /// The funnel had no free slot: not sent (our refusal).
    pub fn is_funnel_full(&self) -> bool {
        self.kind == UnavailableKind::FunnelFull
    }
    /// The shared retry budget refused a retry (our refusal).
    pub fn is_budget_exhausted(&self) -> bool {
        self.kind == UnavailableKind::BudgetExhausted
    }
    /// The circuit breaker is open (our refusal; arrives with a later issue).
    pub fn is_circuit_open(&self) -> bool {
        self.kind == UnavailableKind::CircuitOpen
    }
    /// The upstream kept failing transiently (attempts exhausted, a retry not allowed for the
    /// method, a `Retry-After` beyond `max_retry_after`, or a batch whose retry round was skipped).
    pub fn is_upstream_failed(&self) -> bool {
        self.kind == UnavailableKind::UpstreamFailed
    }
    /// Our own refusal (funnel, budget, circuit, deadline) rather than an upstream error:
    /// metrics count these apart.
    pub fn is_refusal(&self) -> bool {
        !self.is_upstream_failed()
    }

    /// `deadline_exceeded`, `funnel_full`, `budget_exhausted`, `circuit_open` or `upstream_failed`.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            UnavailableKind::DeadlineExceeded => "deadline_exceeded",
            UnavailableKind::FunnelFull => "funnel_full",
            UnavailableKind::BudgetExhausted => "budget_exhausted",
            UnavailableKind::CircuitOpen => "circuit_open",
            UnavailableKind::UpstreamFailed => "upstream_failed",
        }
    }

    /// Attempts actually sent (0 when refused before the first one).
    pub fn attempts(&self) -> u32 {
        self.attempts
    }
    /// The last upstream status, 0 when the last attempt got no answer (or none was made).
    pub fn last_status(&self) -> u16 {
        self.last_status
    }
    /// The last upstream response, when the last attempt got one.
    pub fn last_response(&self) -> Option<&Response> {
        self.last_response.as_deref()
    }
    /// Why the last attempt got no answer (timed out, could not connect, closed early...), so a
    /// caller can tell a timeout from a refused connection without reading the message. `None`
    /// when it got an answer (see [`Unavailable::last_status`]) or no attempt was sent.
    pub fn last_failure(&self) -> Option<FailureKind> {
        self.last_failure
    }
    pub fn into_last_response(self) -> Option<Response> {
        self.last_response.map(|b| *b)
    }
    /// Why, in words; safe to show and log (no query string, no header values).
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Unavailable {}
