//! The attempt record: one per attempt, the single recording point (seed 000: "every call that
//! goes out passes one recorder first", one row per attempt with its real status and duration).
//!
//! The loop hands each record to an [`AttemptObserver`] as soon as the attempt's fate is known
//! (including whether a retry follows). The PHP binding forwards them to `on_attempt` while the
//! call is still in progress, through a channel it drains between polls.

use std::sync::Mutex;
use std::time::Duration;

use crate::decision::{Decision, Outcome};

/// What one attempt did. The URL has no query string and no user-info (query secrets stay out).
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub method: String,
    pub url: String,
    /// 1 for the first attempt.
    pub attempt: u32,
    /// The upstream status, or the failure kind when the attempt got no answer: `timeout`,
    /// `connect`, `closed`, `body`, `too_large` (over `max_body`, never retried), `other`.
    pub outcome: Outcome,
    pub duration: Duration,
    /// What the loop decided after it: return, retry (and why that wait), or give up (why).
    pub decision: Decision,
}

impl AttemptRecord {
    /// The upstream status, or `None` when the attempt got no answer.
    pub fn status(&self) -> Option<u16> {
        self.outcome.status()
    }
    /// The failure kind's name when there was no answer.
    pub fn error(&self) -> Option<&'static str> {
        self.outcome.error()
    }
    /// Whether the loop will make another attempt.
    pub fn retry_follows(&self) -> bool {
        matches!(self.decision, Decision::Retry(_))
    }
    /// Whether the call fails after it (no retry follows and no answer goes back), whatever
    /// the attempt got: a 429 that `max_attempts` ends is a failure as a timeout is.
    pub fn gives_up(&self) -> bool {
        matches!(self.decision, Decision::GiveUp(_))
    }
    /// Why the loop continues or stops, as text: `status 503; retry after backoff 120ms`,
    /// `final status`, `status 503; retry budget exhausted`.
    pub fn reason(&self) -> String {
        self.decision.text(self.outcome)
    }
}

/// Receives attempt records. Must be cheap and must not block.
pub trait AttemptObserver: Send + Sync {
    fn observe(&self, record: AttemptRecord);
}

/// The binding's observer: records go over a channel that the blocking driver drains.
impl AttemptObserver for tokio::sync::mpsc::UnboundedSender<AttemptRecord> {
    fn observe(&self, record: AttemptRecord) {
        // A closed receiver means nobody listens any more; dropping the record is correct.
        let _ = self.send(record);
    }
}

/// Collects records in memory (tests, diagnostics).
#[derive(Debug, Default)]
pub struct RecordLog(pub Mutex<Vec<AttemptRecord>>);

impl RecordLog {
    pub fn records(&self) -> Vec<AttemptRecord> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl AttemptObserver for RecordLog {
    fn observe(&self, record: AttemptRecord) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(record);
    }
}
