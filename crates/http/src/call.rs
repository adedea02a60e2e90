//! THE attempt loop: the single retry owner.
//!
//! One call = one original request = one or more attempts. The loop carries out
//! [`Policy`](crate::policy::Policy)'s decisions with the injected mechanism (clock, sleeper,
//! transport, funnel, budget, observer), in the order of seed 000's `ShippingQuoteClient`:
//!
//! 1. The deadline is set once, at the start: `min(option deadline, enclosing deadline)`.
//!    The original is recorded in the retry budget.
//! 2. Before each attempt: stop (deadline exceeded) when the remainder cannot cover a useful
//!    attempt; take a funnel slot or fail fast (funnel full; our refusal, nothing sent).
//! 3. The attempt runs with `min(timeout, remaining)` and its own connect timeout; the slot
//!    is released as soon as it ends, before anything else, so no slot is ever held in a sleep.
//! 4. The classifier and the policy decide: return the answer, give up, or retry after a wait
//!    (`Retry-After` obeyed and never shortened, else full jitter).
//! 5. A retry asks the budget first (denied: budget exhausted, without sleeping), then the
//!    attempt's record goes to the observer with `retry_follows = true`, then the loop sleeps.
//!
//! Every attempt produces exactly one [`AttemptRecord`], emitted as soon as its fate is known.
//! A call can also pause just before its first retry ([`Call::advance`] with
//! `pause_before_retry`), which is how [`crate::pool`] applies the batch rule.

use std::sync::Arc;
use std::time::Duration;

use crate::attempt::{AttemptObserver, AttemptRecord};
use crate::backoff::FullJitter;
use crate::classify::{classify, may_retry};
use crate::clock::{Clock, Sleeper};
use crate::error::{Unavailable, UnavailableKind};
use crate::gate::{AttemptGate, RetryAllowance, Slot};
use crate::policy::{fmt_duration, AttemptFacts, Next, Policy, FUNNEL_POLL};
use crate::request::PreparedRequest;
use crate::response::Response;
use crate::retry_after::retry_after_of;
use crate::transport::{AttemptLimits, RawResponse, Transport, TransportError};

/// The mechanism a call runs on. Cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct CallEnv {
    pub clock: Arc<dyn Clock>,
    pub sleeper: Arc<dyn Sleeper>,
    pub transport: Arc<dyn Transport>,
    /// The funnel; `None`: no concurrency limit.
    pub gate: Option<Arc<dyn AttemptGate>>,
    /// The retry budget; `None`: retries limited by `max_attempts` and the deadline only.
    pub budget: Option<Arc<dyn RetryAllowance>>,
    pub observer: Option<Arc<dyn AttemptObserver>>,
    /// Fixes the jitter sequence (tests); `None`: seeded from the OS per call.
    pub jitter_seed: Option<u64>,
    /// What the host can afford for one response body now, in bytes (the PHP binding: what
    /// `memory_limit` leaves); lowers the policy's `max_body`. `None`: no host limit.
    pub max_body: Option<u64>,
}

impl CallEnv {
    /// An environment with the given clock, sleeper and transport and no guards.
    pub fn new(
        clock: Arc<dyn Clock>,
        sleeper: Arc<dyn Sleeper>,
        transport: Arc<dyn Transport>,
    ) -> Self {
        Self {
            clock,
            sleeper,
            transport,
            gate: None,
            budget: None,
            observer: None,
            jitter_seed: None,
            max_body: None,
        }
    }
}

/// Where a call stands after [`Call::advance`].
#[derive(Debug)]
pub enum Progress {
    /// The call is over.
    Done(Result<Response, Unavailable>),
    /// The call wants to retry and paused before spending budget or sleeping.
    RetryPending,
}

/// A retry decided but not yet started.
struct PendingRetry {
    delay: Duration,
    reason: String,
    record: AttemptRecord,
}

/// One call in progress.
pub struct Call {
    env: CallEnv,
    policy: Arc<Policy>,
    request: Arc<PreparedRequest>,
    /// The URL as records and messages show it, computed on first use (most calls need none).
    url: std::cell::OnceCell<String>,
    started_ns: u64,
    deadline_ns: Option<u64>,
    attempts: u32,
    first_attempt_transient: bool,
    jitter: FullJitter,
    last: Option<Result<RawResponse, TransportError>>,
    pending: Option<PendingRetry>,
}

impl Call {
    /// Starts a call: fixes the deadline (`enclosing_remaining` is what an enclosing
    /// `Deadline::within` has left, measured by the caller) and records the original.
    pub fn start(
        env: CallEnv,
        policy: Arc<Policy>,
        request: Arc<PreparedRequest>,
        enclosing_remaining: Option<Duration>,
    ) -> Self {
        let started_ns = env.clock.monotonic_ns();
        let deadline = match (policy.deadline, enclosing_remaining) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let deadline_ns =
            deadline.map(|d| started_ns.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64));
        if let Some(budget) = &env.budget {
            budget.record_original(env.clock.monotonic_ms());
        }
        let jitter = match env.jitter_seed {
            Some(seed) => FullJitter::seeded(policy.backoff_base, policy.backoff_cap, seed),
            None => FullJitter::from_entropy(policy.backoff_base, policy.backoff_cap),
        };
        Self {
            env,
            policy,
            request,
            url: std::cell::OnceCell::new(),
            started_ns,
            deadline_ns,
            attempts: 0,
            first_attempt_transient: false,
            jitter,
            last: None,
            pending: None,
        }
    }

    /// Runs the call to its end.
    pub async fn run(mut self) -> Result<Response, Unavailable> {
        loop {
            if let Progress::Done(result) = self.advance(false).await {
                return result;
            }
        }
    }

    /// Attempts made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Whether the first attempt ended transiently (the pool's batch rule counts these).
    pub fn first_attempt_transient(&self) -> bool {
        self.first_attempt_transient
    }

    /// Ends a paused call without its retry (the pool's batch rule), as upstream failed.
    pub fn skip_retry(mut self, why: &str) -> Unavailable {
        let reason = match self.pending.take() {
            Some(pending) => {
                let reason = format!("{}; retry skipped: {why}", outcome_text(&pending.record));
                self.emit(pending.record, false, reason.clone());
                reason
            }
            None => format!("retry skipped: {why}"),
        };
        self.unavailable(UnavailableKind::UpstreamFailed, reason)
    }

    /// Runs until the call is over, or (with `pause_before_retry`) until it wants to retry.
    pub async fn advance(&mut self, pause_before_retry: bool) -> Progress {
        loop {
            if let Some(pending) = self.pending.take() {
                if pause_before_retry {
                    self.pending = Some(pending);
                    return Progress::RetryPending;
                }
                match self.begin_retry(pending) {
                    Ok(delay) => self.env.sleeper.sleep(delay).await,
                    Err(err) => return Progress::Done(Err(err)),
                }
            }
            if let Some(done) = self.attempt().await {
                return Progress::Done(done);
            }
        }
    }

    /// Spends the budget and tells the observer a retry follows; returns the wait.
    /// Errors end the call at once, without sleeping.
    fn begin_retry(&mut self, pending: PendingRetry) -> Result<Duration, Unavailable> {
        // Time may have passed since the decision (a paused pool call): check the deadline again.
        let remaining = self.remaining();
        if remaining != Duration::MAX
            && remaining
                < pending
                    .delay
                    .saturating_add(self.policy.min_useful_attempt())
        {
            let reason = format!(
                "{}; deadline exceeded: a wait of {} plus a useful attempt does not fit in the {} left",
                outcome_text(&pending.record),
                fmt_duration(pending.delay),
                fmt_duration(remaining)
            );
            self.emit(pending.record, false, reason.clone());
            return Err(self.unavailable(UnavailableKind::DeadlineExceeded, reason));
        }
        if let Some(budget) = &self.env.budget {
            if !budget.try_consume(self.env.clock.monotonic_ms()) {
                let reason = format!("{}; retry budget exhausted", outcome_text(&pending.record));
                self.emit(pending.record, false, reason.clone());
                return Err(self.unavailable(UnavailableKind::BudgetExhausted, reason));
            }
        }
        self.emit(pending.record, true, pending.reason);
        Ok(pending.delay)
    }

    /// Takes a funnel slot. When the funnel is full, waits for one up to the policy's
    /// `funnel_wait` (polling; the wait counts in the deadline and never eats into the time a
    /// useful attempt needs), then fails fast: our refusal, nothing sent.
    async fn enter(&mut self, gate: &dyn AttemptGate, number: u32) -> Result<Slot, Unavailable> {
        let started = self.env.clock.monotonic_ns();
        loop {
            if let Some(slot) = gate.try_enter(self.env.clock.monotonic_ms()) {
                return Ok(slot);
            }
            let waited =
                Duration::from_nanos(self.env.clock.monotonic_ns().saturating_sub(started));
            let room = self
                .remaining()
                .saturating_sub(self.policy.min_useful_attempt());
            let left = self.policy.funnel_wait.saturating_sub(waited).min(room);
            if left.is_zero() {
                let reason = if waited.is_zero() {
                    format!("funnel full: no free slot for attempt {number}, not sent")
                } else {
                    format!(
                        "funnel full: no free slot for attempt {number} after waiting {}, not sent",
                        fmt_duration(waited)
                    )
                };
                return Err(self.unavailable(UnavailableKind::FunnelFull, reason));
            }
            self.env.sleeper.sleep(left.min(FUNNEL_POLL)).await;
        }
    }

    /// One attempt: admission, send, release, decide. `None` when a retry is now pending.
    async fn attempt(&mut self) -> Option<Result<Response, Unavailable>> {
        let number = self.attempts + 1;
        let remaining = self.remaining();
        if let Err(reason) = self.policy.before_attempt(number, remaining) {
            return Some(Err(
                self.unavailable(UnavailableKind::DeadlineExceeded, reason)
            ));
        }
        let slot = match self.env.gate.clone() {
            Some(gate) => match self.enter(gate.as_ref(), number).await {
                Ok(slot) => Some(slot),
                Err(e) => return Some(Err(e)),
            },
            None => None,
        };
        let (timeout, connect_timeout) = self.policy.attempt_limits(self.remaining());
        self.attempts = number;
        let began = self.env.clock.monotonic_ns();
        let outcome = self
            .env
            .transport
            .send(
                &self.request,
                AttemptLimits {
                    timeout,
                    connect_timeout,
                    max_body: self
                        .env
                        .max_body
                        .map_or(self.policy.max_body, |m| m.min(self.policy.max_body)),
                },
            )
            .await;
        // Release before anything else: no path from here holds the slot into a sleep.
        drop(slot);
        let duration = Duration::from_nanos(self.env.clock.monotonic_ns().saturating_sub(began));

        let verdict = classify(&outcome, &self.policy.retry_on);
        if number == 1 {
            self.first_attempt_transient = verdict.is_transient();
        }
        let retry_after = match &outcome {
            Ok(response) if verdict.is_transient() => retry_after_of(
                response
                    .headers
                    .iter()
                    .filter_map(|(n, v)| Some((n.as_str(), std::str::from_utf8(v).ok()?))),
                self.env.clock.wall(),
            ),
            _ => None,
        };
        let facts = AttemptFacts {
            attempt: number,
            verdict,
            may_retry: may_retry(&self.request.method, self.request.has_idempotency_key),
            retry_after,
            remaining: self.remaining(),
        };
        let next = self.policy.after_attempt(facts, &mut self.jitter);
        let record = AttemptRecord {
            method: if self.env.observer.is_some() {
                self.request.method.to_string()
            } else {
                String::new()
            },
            url: if self.env.observer.is_some() {
                self.url().to_string()
            } else {
                String::new()
            },
            attempt: number,
            status: outcome.as_ref().ok().map(|r| r.status),
            error: outcome.as_ref().err().map(|e| e.kind.as_str()),
            duration,
            retry_follows: false,
            reason: String::new(),
        };
        self.last = Some(outcome);
        match next {
            Next::Return => {
                self.emit(record, false, "final status".into());
                let raw = match self.last.take() {
                    Some(Ok(raw)) => raw,
                    _ => unreachable!("Next::Return only follows a response"),
                };
                Some(Ok(Response::new(raw, self.attempts, self.elapsed())))
            }
            Next::GiveUp { kind, reason } => {
                self.emit(record, false, reason.clone());
                Some(Err(self.unavailable(kind, reason)))
            }
            Next::Retry { delay, reason } => {
                self.pending = Some(PendingRetry {
                    delay,
                    reason,
                    record,
                });
                None
            }
        }
    }

    fn emit(&self, mut record: AttemptRecord, retry_follows: bool, reason: String) {
        if let Some(observer) = &self.env.observer {
            record.retry_follows = retry_follows;
            record.reason = reason;
            observer.observe(record);
        }
    }

    fn url(&self) -> &str {
        self.url.get_or_init(|| self.request.display_url())
    }

    fn remaining(&self) -> Duration {
        match self.deadline_ns {
            Some(deadline) => {
                Duration::from_nanos(deadline.saturating_sub(self.env.clock.monotonic_ns()))
            }
            None => Duration::MAX,
        }
    }

    fn elapsed(&self) -> Duration {
        Duration::from_nanos(
            self.env
                .clock
                .monotonic_ns()
                .saturating_sub(self.started_ns),
        )
    }

    /// The error, with the last response attached and a message naming method and URL.
    fn unavailable(&mut self, kind: UnavailableKind, reason: String) -> Unavailable {
        let last_failure = match &self.last {
            Some(Err(e)) => Some(format!(" [{e}]")),
            _ => None,
        };
        let last_response = match self.last.take() {
            Some(Ok(raw)) => Some(Response::new(raw, self.attempts, self.elapsed())),
            _ => None,
        };
        let plural = if self.attempts == 1 { "" } else { "s" };
        let message = format!(
            "{} {}: {reason} ({} attempt{plural} in {}){}",
            self.request.method,
            self.url(),
            self.attempts,
            fmt_duration(self.elapsed()),
            last_failure.unwrap_or_default()
        );
        Unavailable::new(kind, self.attempts, last_response, message)
    }
}

/// `status 503` or `timeout error`: the outcome part of a reason.
fn outcome_text(record: &AttemptRecord) -> String {
    match (record.status, record.error) {
        (Some(status), _) => format!("status {status}"),
        (None, Some(kind)) => format!("{kind} error"),
        (None, None) => "attempt".into(),
    }
}
