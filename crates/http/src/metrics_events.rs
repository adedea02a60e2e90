//! Host-wide metrics as [`CallEvents`]: every call and attempt of a client recorded in its
//! name's entry of the shared segment (`resilient_core::Metrics`, relaxed atomic adds).
//!
//! The mapping is policy, kept here: a status below 400 is a success, 4xx and 5xx are upstream
//! failures by class, an attempt without an answer is a timeout, a connection failure or
//! another failure; a call that ends unavailable by the funnel, the budget, the deadline or the
//! circuit is our refusal, counted apart (an upstream-failed call was already counted by its
//! attempts).

use std::sync::Arc;
use std::time::Duration;

use resilient_core::{
    AttemptClass, CircuitState, FailureClass, Metrics, RefusalReason, Transition,
};

use crate::call_events::{CallEnd, CallEvents};
use crate::decision::Outcome;
use crate::error::UnavailableKind;
use crate::guard::Permit;
use crate::transport::FailureKind;

/// Records a client's calls in the metrics of its name.
pub struct MetricsEvents(Arc<Metrics>);

impl MetricsEvents {
    pub fn new(metrics: Metrics) -> Self {
        Self(Arc::new(metrics))
    }
}

/// How metrics class an attempt's outcome.
pub fn attempt_class(outcome: Outcome) -> AttemptClass {
    match outcome {
        Outcome::Status(s) if s < 400 => AttemptClass::Success,
        Outcome::Status(s) if s < 500 => AttemptClass::Failure(FailureClass::Status4xx),
        Outcome::Status(_) => AttemptClass::Failure(FailureClass::Status5xx),
        Outcome::Failed(FailureKind::Timeout) => AttemptClass::Failure(FailureClass::Timeout),
        Outcome::Failed(FailureKind::Connect) => AttemptClass::Failure(FailureClass::Connection),
        Outcome::Failed(_) => AttemptClass::Failure(FailureClass::Other),
    }
}

/// Our refusal behind an unavailable call; `None` for an upstream failure.
pub fn refusal_of(kind: UnavailableKind) -> Option<RefusalReason> {
    match kind {
        UnavailableKind::FunnelFull => Some(RefusalReason::Funnel),
        UnavailableKind::BudgetExhausted => Some(RefusalReason::Budget),
        UnavailableKind::DeadlineExceeded => Some(RefusalReason::Deadline),
        UnavailableKind::CircuitOpen => Some(RefusalReason::Circuit),
        UnavailableKind::UpstreamFailed => None,
    }
}

impl CallEvents for MetricsEvents {
    fn breaker_transition(&self, transition: Transition) {
        self.0.breaker_transition(match transition {
            Transition::Opened | Transition::Reopened => CircuitState::Open,
            Transition::HalfOpened | Transition::ProbeGivenUp => CircuitState::HalfOpen,
            Transition::Closed => CircuitState::Closed,
        });
    }
    fn fallback_used(&self) {
        self.0.fallback_used();
    }
    fn backend_fallback(&self) {
        self.0.backend_fallback();
    }

    fn call_started(&self) {
        self.0.call_started();
    }

    fn attempt_sent(&self, attempt: u32) -> Permit {
        self.0.attempt_sent(attempt);
        let metrics = self.0.clone();
        Permit::holding(move || metrics.attempt_released())
    }

    fn attempt_ended(&self, _attempt: u32, outcome: Outcome, duration: Duration) {
        self.0.attempt_ended(attempt_class(outcome), duration);
    }

    fn call_ended(&self, end: CallEnd) {
        match end.result {
            Ok(status) if status < 400 => self.0.call_succeeded(end.attempts),
            Ok(_) => {}
            Err(kind) => {
                if let Some(reason) = refusal_of(kind) {
                    self.0.refused(reason);
                }
            }
        }
    }
}
