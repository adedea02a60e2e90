//! The loop's vocabulary as types: what an attempt ended with, why a retry follows, why a call
//! gives up. Text only at the edges: each type's `Display` gives the words attempt records and
//! messages show (`status 503; retry after backoff 120ms`), built only when someone reads them.

use std::fmt;
use std::time::Duration;

use crate::error::UnavailableKind;
use crate::transport::FailureKind;

/// What one attempt ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The upstream answered with this status.
    Status(u16),
    /// No answer: why.
    Failed(FailureKind),
}

impl Outcome {
    pub fn status(self) -> Option<u16> {
        match self {
            Outcome::Status(s) => Some(s),
            Outcome::Failed(_) => None,
        }
    }
    /// The failure kind's name (`timeout`, `connect`...) when there was no answer.
    pub fn error(self) -> Option<&'static str> {
        match self {
            Outcome::Status(_) => None,
            Outcome::Failed(kind) => Some(kind.as_str()),
        }
    }
}

/// `status 503`, `timeout error`.
impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Status(s) => write!(f, "status {s}"),
            Outcome::Failed(kind) => write!(f, "{} error", kind.as_str()),
        }
    }
}

/// How long the loop waits before a retry, and why that long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryReason {
    /// The jittered backoff; no `Retry-After`.
    Backoff(Duration),
    /// The server's `Retry-After`, longer than the backoff, obeyed in full.
    RetryAfter(Duration),
    /// The backoff, because the server's `Retry-After` was shorter (a floor, never shortened).
    BackoffOverRetryAfter {
        backoff: Duration,
        retry_after: Duration,
    },
}

impl RetryReason {
    pub fn delay(self) -> Duration {
        match self {
            RetryReason::Backoff(d) | RetryReason::RetryAfter(d) => d,
            RetryReason::BackoffOverRetryAfter { backoff, .. } => backoff,
        }
    }
}

/// `backoff 120ms`, `Retry-After 2s`, `backoff 10ms (Retry-After 0ms is shorter)`.
impl fmt::Display for RetryReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            RetryReason::Backoff(d) => write!(f, "backoff {}", fmt_duration(d)),
            RetryReason::RetryAfter(d) => write!(f, "Retry-After {}", fmt_duration(d)),
            RetryReason::BackoffOverRetryAfter {
                backoff,
                retry_after,
            } => write!(
                f,
                "backoff {} (Retry-After {} is shorter)",
                fmt_duration(backoff),
                fmt_duration(retry_after)
            ),
        }
    }
}

/// Why a call stops after an attempt without returning its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GiveUpReason {
    /// The failure would repeat (a body over `max_body`).
    NotRetryable,
    /// POST/PATCH without an idempotency key.
    NotIdempotent,
    /// `max_attempts` attempts were made; `capped_by`: the cap that lowered it, by name.
    MaxAttempts {
        n: u32,
        capped_by: Option<&'static str>,
    },
    RetryAfterTooLong {
        wait: Duration,
        max: Duration,
    },
    /// The planned wait plus a useful attempt does not fit in what is left (decided at once).
    NoTimeForRetry {
        wait: RetryReason,
        left: Duration,
    },
    /// The same, found when the retry was about to start (a paused pool call).
    NoTimeForWait {
        delay: Duration,
        left: Duration,
    },
    BudgetExhausted,
    /// The deadline ended the attempt in flight (its timeout was what was left of it).
    DeadlineEnded,
    /// The pool's batch rule: more than half of the batch's first attempts failed.
    BatchFailing {
        failed: usize,
        of: usize,
    },
}

impl GiveUpReason {
    /// How the call ends.
    pub fn kind(self) -> UnavailableKind {
        match self {
            GiveUpReason::NoTimeForRetry { .. }
            | GiveUpReason::NoTimeForWait { .. }
            | GiveUpReason::DeadlineEnded => UnavailableKind::DeadlineExceeded,
            GiveUpReason::BudgetExhausted => UnavailableKind::BudgetExhausted,
            _ => UnavailableKind::UpstreamFailed,
        }
    }
}

impl fmt::Display for GiveUpReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            GiveUpReason::NotRetryable => f.write_str("not retried"),
            GiveUpReason::NotIdempotent => f.write_str(
                "not retried: the method is not idempotent and no idempotency_key was given",
            ),
            GiveUpReason::MaxAttempts { n, capped_by: None } => {
                write!(f, "max_attempts ({n}) reached")
            }
            GiveUpReason::MaxAttempts {
                n,
                capped_by: Some(cap),
            } => write!(f, "max_attempts ({n}, capped by {cap}) reached"),
            GiveUpReason::RetryAfterTooLong { wait, max } => write!(
                f,
                "Retry-After {} exceeds max_retry_after {}, failing without waiting",
                fmt_duration(wait),
                fmt_duration(max)
            ),
            GiveUpReason::NoTimeForRetry { wait, left } => write!(
                f,
                "deadline exceeded: {wait} plus a useful attempt does not fit in the {} left, failing without waiting",
                fmt_duration(left)
            ),
            GiveUpReason::NoTimeForWait { delay, left } => write!(
                f,
                "deadline exceeded: a wait of {} plus a useful attempt does not fit in the {} left",
                fmt_duration(delay),
                fmt_duration(left)
            ),
            GiveUpReason::BudgetExhausted => f.write_str("retry budget exhausted"),
            GiveUpReason::DeadlineEnded => {
                f.write_str("deadline exceeded: the deadline ended the attempt")
            }
            GiveUpReason::BatchFailing { failed, of } => write!(
                f,
                "retry skipped: more than half of the batch's first attempts failed ({failed} of {of})"
            ),
        }
    }
}

/// What the loop decided after an attempt, as its record carries it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// The answer goes back to the caller.
    Final,
    Retry(RetryReason),
    GiveUp(GiveUpReason),
}

impl Decision {
    /// The record's `reason` text: `final status`, `status 503; retry after backoff 120ms`.
    pub fn text(self, outcome: Outcome) -> String {
        match self {
            Decision::Final => "final status".into(),
            Decision::Retry(why) => format!("{outcome}; retry after {why}"),
            Decision::GiveUp(why) => format!("{outcome}; {why}"),
        }
    }
}

/// `1.5s`, `250ms`, `12µs`; waits longer than a year (the longest any option takes) as `>1y`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    if d > Duration::from_secs(365 * 86_400) {
        ">1y".into()
    } else if d >= Duration::from_secs(1) {
        let s = format!("{:.3}", d.as_secs_f64());
        format!("{}s", s.trim_end_matches('0').trim_end_matches('.'))
    } else if d >= Duration::from_millis(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{}µs", d.as_micros())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn records_read_as_before() {
        let s503 = Outcome::Status(503);
        assert_eq!(Decision::Final.text(Outcome::Status(200)), "final status");
        assert_eq!(
            Decision::Retry(RetryReason::Backoff(120 * MS)).text(s503),
            "status 503; retry after backoff 120ms"
        );
        assert_eq!(
            Decision::Retry(RetryReason::BackoffOverRetryAfter {
                backoff: 10 * MS,
                retry_after: Duration::ZERO
            })
            .text(Outcome::Status(429)),
            "status 429; retry after backoff 10ms (Retry-After 0µs is shorter)"
        );
        assert_eq!(
            Decision::GiveUp(GiveUpReason::NotRetryable)
                .text(Outcome::Failed(FailureKind::TooLarge)),
            "too_large error; not retried"
        );
        assert_eq!(
            Decision::GiveUp(GiveUpReason::BudgetExhausted).text(s503),
            "status 503; retry budget exhausted"
        );
        assert_eq!(
            GiveUpReason::BudgetExhausted.kind(),
            UnavailableKind::BudgetExhausted
        );
    }
}
