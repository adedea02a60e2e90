//! THE attempt loop: the single retry owner.
//!
//! One call = one original request = one or more attempts. The loop carries out
//! [`Policy`](crate::policy::Policy)'s decisions with the injected mechanism (clock, sleeper,
//! transport, admission guards, retry allowance, observer), in the order of seed 000's `ShippingQuoteClient`:
//!
//! 1. The deadline is set once, at the start: `min(option deadline, enclosing deadline)`.
//!    The original is recorded in the retry budget.
//! 2. Before each attempt: stop (deadline exceeded) when the remainder cannot cover a useful
//!    attempt; ask every [`Guard`] in order for a permit. A refusal is ours, nothing sent: an
//!    open circuit fails fast; a full funnel is asked again every millisecond for up to
//!    `funnel.wait` (within the deadline), then fails.
//! 3. The attempt runs with `min(timeout, remaining)` and its own connect timeout; the permits
//!    are ended as soon as it ends, before anything else, so this process never holds a slot in
//!    a sleep; then each guard is told the attempt's [`Outcome`].
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
use crate::body_memory::{BodyLimit, SharedBodyLimit};
use crate::call_events::{CallEnd, CallEvents};
use crate::classify::{classify, may_retry};
use crate::clock::{Clock, Sleeper};
use crate::decision::Outcome;
use crate::decision::{fmt_duration, Decision, GiveUpReason, RetryReason};
use crate::error::{Unavailable, UnavailableKind};
use crate::guard::{Ended, Guard, Permit, Refusal, RetryAllowance};
use crate::policy::{AttemptFacts, Next, Policy, FUNNEL_POLL};
use crate::redirect;
use crate::request::PreparedRequest;
use crate::response::Response;
use crate::retry_after::retry_after_of;
use crate::time_left;
use crate::transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};

/// The mechanism a call runs on. Cheap to clone (all `Arc`s).
#[derive(Clone)]
pub struct CallEnv {
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    transport: Arc<dyn Transport>,
    /// Admission guards, asked in order before every attempt (see [`crate::guard`]).
    guards: Vec<Arc<dyn Guard>>,
    /// The retry budget; `None`: retries limited by `max_attempts` and the deadline only.
    allowance: Option<Arc<dyn RetryAllowance>>,
    observer: Option<Arc<dyn AttemptObserver>>,
    /// Told each call's start and end and each attempt (metrics, see [`crate::call_events`]).
    events: Option<Arc<dyn CallEvents>>,
    /// Fixes the jitter sequence (tests); `None`: seeded from the OS per call.
    jitter_seed: Option<u64>,
    /// What the host can afford for the response bodies of this call (or of every call of a
    /// pool, which share the env) now, in bytes (the PHP binding: what `memory_limit` leaves);
    /// also lowers the policy's `max_body`. `None`: no host limit.
    memory: Option<Arc<SharedBodyLimit>>,
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
            guards: Vec::new(),
            allowance: None,
            observer: None,
            events: None,
            jitter_seed: None,
            memory: None,
        }
    }

    /// Adds an admission guard after those already there.
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }

    /// Sets the retry allowance (the retry budget).
    pub fn allowance(mut self, allowance: Arc<dyn RetryAllowance>) -> Self {
        self.allowance = Some(allowance);
        self
    }

    /// The admission guards, in the order they are asked.
    pub fn guards(&self) -> &[Arc<dyn Guard>] {
        &self.guards
    }

    /// Sets who is told about every attempt (`on_attempt`).
    pub fn observer(mut self, observer: Arc<dyn AttemptObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Sets who is told each call's start and end and each attempt (metrics).
    pub fn events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// Who is told each call's start and end, if anyone.
    pub fn told(&self) -> Option<&Arc<dyn CallEvents>> {
        self.events.as_ref()
    }

    /// Replaces the transport (the binding's per-process one, after a fork).
    pub fn transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.transport = transport;
        self
    }

    /// Fixes the jitter sequence (tests).
    pub fn jitter_seed(mut self, seed: u64) -> Self {
        self.jitter_seed = Some(seed);
        self
    }

    /// What the host can afford for the response bodies of the call or pool run with this env
    /// (held together), in bytes; lowers the policy's `max_body` (`None`: no host limit).
    pub fn max_body(mut self, bytes: Option<u64>) -> Self {
        self.memory = bytes.map(SharedBodyLimit::new);
        self
    }

    pub(crate) fn transport_ref(&self) -> &Arc<dyn Transport> {
        &self.transport
    }

    pub(crate) fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
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

/// A call dropped between its retry's count and its send (PHP stopped it in the backoff: a
/// signal handler's exception, a pool abandoned) gives the retry back as a refused one does.
impl Drop for Call {
    fn drop(&mut self) {
        self.give_back_retry();
    }
}

/// A retry decided but not yet started.
struct PendingRetry {
    reason: RetryReason,
    record: AttemptRecord,
    /// When it was decided: a pool call paused since has waited that long already.
    decided_ns: u64,
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
    /// Where `last`'s answer came from when its attempt followed a redirect.
    redirected_to: Option<reqwest::Url>,
    pending: Option<PendingRetry>,
    /// When the budget counted the retry about to be sent: given back if it never is.
    withdrawn_at_ms: Option<u64>,
}

impl Call {
    /// Starts a call: fixes the deadline (`enclosing_remaining` is what an enclosing
    /// `Deadline::within` has left, measured by the caller). The original is recorded in the
    /// budget when its first attempt is admitted ([`Call::attempt`]).
    pub fn start(
        env: CallEnv,
        policy: Arc<Policy>,
        request: Arc<PreparedRequest>,
        enclosing_remaining: Option<Duration>,
    ) -> Self {
        let started_ns = env.clock.monotonic_ns();
        let deadline = policy.deadline_within(enclosing_remaining);
        let deadline_ns =
            deadline.map(|d| started_ns.saturating_add(d.as_nanos().min(u64::MAX as u128) as u64));
        if let Some(events) = &env.events {
            events.call_started();
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
            redirected_to: None,
            pending: None,
            withdrawn_at_ms: None,
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

    /// Ends a paused call without its retry (the pool's batch rule: `failed` of `of` first
    /// attempts failed), as upstream failed.
    pub fn skip_retry(mut self, failed: usize, of: usize) -> Unavailable {
        let why = GiveUpReason::BatchFailing { failed, of };
        let reason = match self.pending.take() {
            Some(pending) => self.give_up(pending.record, why),
            None => why.to_string(),
        };
        self.unavailable(why.kind(), reason)
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
        // Time may have passed since the decision (a paused pool call): it counts in the wait
        // (a `Retry-After` runs from the answer), and the deadline is checked again.
        let waited = Duration::from_nanos(
            self.env
                .clock
                .monotonic_ns()
                .saturating_sub(pending.decided_ns),
        );
        let delay = pending.reason.delay().saturating_sub(waited);
        let remaining = self.remaining();
        if remaining != Duration::MAX
            && remaining < delay.saturating_add(self.policy.min_useful_attempt())
        {
            let why = GiveUpReason::NoTimeForWait {
                delay,
                left: remaining,
            };
            let reason = self.give_up(pending.record, why);
            return Err(self.unavailable(why.kind(), reason));
        }
        if let Some(budget) = &self.env.allowance {
            let left = time_left::scope(self.time_for_guards(delay));
            let now_ms = self.env.clock.monotonic_ms();
            let allowed = budget.try_consume(now_ms);
            drop(left);
            if !allowed {
                let why = GiveUpReason::BudgetExhausted;
                let mut reason = self.give_up(pending.record, why);
                if let Some(because) = budget.refused_because(now_ms) {
                    reason = format!("{reason}: {because}");
                }
                return Err(self.unavailable(why.kind(), reason));
            }
            self.withdrawn_at_ms = Some(now_ms);
        }
        self.emit(pending.record, Decision::Retry(pending.reason));
        Ok(delay)
    }

    /// The budget is a share of what the upstream got: a retry it counted that our guards (or
    /// the deadline) then stopped is given back.
    fn give_back_retry(&mut self) {
        if let (Some(at), Some(budget)) = (self.withdrawn_at_ms.take(), &self.env.allowance) {
            let _left = time_left::scope(self.time_for_guards(Duration::ZERO));
            budget.give_back(at, self.env.clock.monotonic_ms());
        }
    }

    /// Asks every guard, in order, for a permit. A guard that is full (the funnel) is asked
    /// again, polling, up to the policy's `funnel_wait` (the wait counts in the deadline and
    /// never eats into the time a useful attempt needs); then, or on any other refusal, the call
    /// fails fast: our refusal, nothing sent.
    async fn admit(&mut self, number: u32) -> Result<Vec<Permit>, Unavailable> {
        if self.env.guards.is_empty() {
            return Ok(Vec::new());
        }
        let started = self.env.clock.monotonic_ns();
        // Whether the call waited for a slot (`funnel.wait`), not the time the admissions took.
        let mut slept = false;
        loop {
            let left = time_left::scope(self.time_for_guards(Duration::ZERO));
            let (refusal, by) =
                match admit_all(&self.env.guards, number, self.env.clock.monotonic_ms()) {
                    Ok(permits) => return Ok(permits),
                    Err(refused) => refused,
                };
            drop(left);
            let waited =
                Duration::from_nanos(self.env.clock.monotonic_ns().saturating_sub(started));
            let left = match refusal {
                Refusal::Full | Refusal::BackendDown(UnavailableKind::FunnelFull) => {
                    let room = self
                        .remaining()
                        .saturating_sub(self.policy.min_useful_attempt());
                    self.policy.funnel_wait.saturating_sub(waited).min(room)
                }
                _ => Duration::ZERO,
            };
            if left.is_zero() {
                let (kind, reason) = match refusal {
                    Refusal::BackendDown(kind) => (
                        kind,
                        format!(
                            "the backend did not answer or refused (on_backend_error 'closed'): \
                             attempt {number} refused, not sent{}",
                            (by.why_down())
                                .map_or_else(String::new, |why| format!(" ({why})"))
                        ),
                    ),
                    Refusal::CircuitOpen => (
                        UnavailableKind::CircuitOpen,
                        format!("circuit open: attempt {number} refused, not sent"),
                    ),
                    Refusal::Full if !slept => (
                        UnavailableKind::FunnelFull,
                        format!(
                            "funnel full: no free slot for attempt {number}, not sent{}",
                            self.why_full()
                        ),
                    ),
                    Refusal::Full => (
                        UnavailableKind::FunnelFull,
                        format!(
                            "funnel full: no free slot for attempt {number} after waiting {}, not sent{}",
                            fmt_duration(waited),
                            self.why_full()
                        ),
                    ),
                };
                return Err(self.unavailable(kind, reason));
            }
            self.env.sleeper.sleep(left.min(FUNNEL_POLL)).await;
            slept = true;
        }
    }

    /// ` (7 of 10 slots in flight; ...)` from the first guard that can say why it is full.
    fn why_full(&self) -> String {
        let now_ms = self.env.clock.monotonic_ms();
        (self.env.guards.iter())
            .find_map(|g| g.why_full(now_ms))
            .map_or_else(String::new, |why| format!(" ({why})"))
    }

    /// The permits for attempt `number`, with time left to send it; else why not (nothing sent).
    async fn admit_to_send(&mut self, number: u32) -> Result<Vec<Permit>, Unavailable> {
        if let Err(reason) = self.policy.before_attempt(number, self.remaining()) {
            return Err(self.unavailable(UnavailableKind::DeadlineExceeded, reason));
        }
        let permits = self.admit(number).await?;
        // Admission may end late (a slow backend; a wait whose thread PHP code held): the
        // deadline again, so that nothing is sent past it. The permits go back unused.
        if let Err(reason) = self.policy.before_attempt(number, self.remaining()) {
            drop(permits);
            return Err(self.unavailable(UnavailableKind::DeadlineExceeded, reason));
        }
        Ok(permits)
    }

    /// One attempt: admission, send, release, decide. `None` when a retry is now pending.
    async fn attempt(&mut self) -> Option<Result<Response, Unavailable>> {
        let number = self.attempts + 1;
        let mut permits = match self.admit_to_send(number).await {
            Ok(permits) => permits,
            Err(e) => {
                self.give_back_retry();
                return Some(Err(e));
            }
        };
        // Sent from here: the retry's withdrawal stands.
        self.withdrawn_at_ms = None;
        // The budget is a share of the load the upstream gets: an original deposits once it is
        // sent, never when our guards refused it (a demand the funnel turned away would earn
        // retries for calls that never reached the upstream).
        if let (1, Some(budget)) = (number, &self.env.allowance) {
            let _left = time_left::scope(self.time_for_guards(Duration::ZERO));
            budget.record_original(self.env.clock.monotonic_ms());
        }
        if let Some(events) = &self.env.events {
            permits.push(events.attempt_sent(number));
        }
        // An attempt never outlives what admitted it (a funnel slot's lease, a probe's ticket).
        let remaining = self.remaining();
        let (room, lapsing) = permits.iter().filter_map(Permit::lasts_for).fold(
            (remaining, None),
            |(room, by), (lasts, what)| match lasts < room {
                true => (lasts, Some(what)),
                false => (room, by),
            },
        );
        let (timeout, connect_timeout) = self.policy.attempt_limits(room);
        let cut_short = timeout == remaining && remaining < self.policy.timeout;
        // What cut the attempt's timeout below its own, when it was a permit's bound, or below
        // the options', when it was a cap.
        let cut_by = lapsing
            .filter(|_| timeout == room && room < self.policy.timeout)
            .or(self
                .policy
                .timeout_capped_by
                .filter(|_| timeout == self.policy.timeout));
        self.attempts = number;
        let began = self.env.clock.monotonic_ns();
        let limits = AttemptLimits {
            timeout,
            connect_timeout,
            connect_timeout_setting: self.policy.connect_timeout,
            body: BodyLimit {
                max: self.env.memory.as_ref().map_or(self.policy.max_body, |m| {
                    m.limit().min(self.policy.max_body)
                }),
                shared: self.env.memory.clone(),
            },
            follows_redirects: false,
        };
        self.redirected_to = None;
        // The answer before this attempt is thrown away now, before another body is read: its
        // memory no longer counts.
        if let (Some(Ok(thrown)), Some(memory)) = (self.last.take(), &self.env.memory) {
            memory.give_back(thrown.body.len() as u64);
        }
        let outcome = match self.request.transport.redirects {
            None => self.env.transport.send(&self.request, limits).await,
            Some(rules) => {
                let (transport, clock) = (self.env.transport.as_ref(), self.env.clock.as_ref());
                redirect::follow(transport, &self.request, limits, rules, clock)
                    .await
                    .map(|(raw, redirected_to)| {
                        self.redirected_to = redirected_to;
                        raw
                    })
            }
        };
        // An answer the client retries on is that answer even with its body over max_body.
        let mut outcome = outcome.or_else(|e| e.into_retryable_answer(&self.policy.retry_on));
        if let (Err(e), Some(what)) = (&mut outcome, cut_by) {
            if e.kind == FailureKind::Timeout {
                e.detail = format!(
                    "{} after {}, cut to {what}",
                    e.detail,
                    fmt_duration(timeout)
                );
            }
        }
        // Release before anything else: no path from here holds the slot into a sleep.
        let left = time_left::scope(self.remaining());
        let duration = Duration::from_nanos(self.env.clock.monotonic_ns().saturating_sub(began));
        let ended = match &outcome {
            Ok(response) => Outcome::Status(response.status),
            Err(e) => Outcome::Failed(e.kind),
        };
        let end = Ended {
            outcome: ended,
            duration,
            now_ms: self.env.clock.monotonic_ms(),
            cut_short,
            allowed: (self.policy.timeout).min(self.policy.deadline.unwrap_or(Duration::MAX)),
        };
        // A failure of ours (the sink file could not be written, the request could not be made)
        // says nothing about the upstream: the guards learn nothing from it (permits dropped
        // without an outcome, so a breaker's probe gives its ticket back, no latency sample).
        let ours = matches!(ended, Outcome::Failed(kind) if kind.is_ours());
        for permit in permits {
            if ours {
                drop(permit);
            } else {
                permit.end(&end);
            }
        }
        if let Some(events) = &self.env.events {
            events.attempt_ended(number, ended, duration);
        }
        if !self.env.guards.is_empty() && !ours {
            let end = Ended {
                now_ms: self.env.clock.monotonic_ms(),
                ..end
            };
            for guard in &self.env.guards {
                guard.ended(&end);
            }
        }
        drop(left);

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
            deadline_cut: end.by_deadline(),
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
            outcome: ended,
            duration,
            decision: Decision::Final,
        };
        self.last = Some(outcome);
        match next {
            Next::Return => {
                self.emit(record, Decision::Final);
                let raw = match self.last.take() {
                    Some(Ok(raw)) => raw,
                    _ => unreachable!("Next::Return only follows a response"),
                };
                self.ended(Ok(raw.status));
                Some(Ok(self.response(raw)))
            }
            Next::GiveUp { reason: why } => {
                let reason = self.give_up(record, why);
                Some(Err(self.unavailable(why.kind(), reason)))
            }
            Next::Retry { reason } => {
                let decided_ns = self.env.clock.monotonic_ns();
                self.pending = Some(PendingRetry {
                    reason,
                    record,
                    decided_ns,
                });
                None
            }
        }
    }

    /// Hands the record to the observer, with the decision taken after it.
    fn emit(&self, mut record: AttemptRecord, decision: Decision) {
        if let Some(observer) = &self.env.observer {
            record.decision = decision;
            observer.observe(record);
        }
    }

    /// Emits the record of a call that stops after it; returns the reason's text for the
    /// message (`status 503; max_attempts (3) reached`).
    fn give_up(&self, record: AttemptRecord, why: GiveUpReason) -> String {
        let decision = Decision::GiveUp(why);
        let text = decision.text(record.outcome);
        self.emit(record, decision);
        text
    }

    /// Tells the events how the call ended (every end passes here or through `Next::Return`).
    fn ended(&self, result: Result<u16, UnavailableKind>) {
        if let Some(events) = &self.env.events {
            events.call_ended(CallEnd {
                attempts: self.attempts,
                result,
            });
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

    /// What a guard or the budget may spend asking its backend before an attempt that starts
    /// after `delay`: [`time_for_guards`] of what is left.
    fn time_for_guards(&self, delay: Duration) -> Duration {
        match self.remaining() {
            Duration::MAX => Duration::MAX,
            left => time_for_guards(left, delay, &self.policy),
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

    /// The call's answer `raw`, from the URL its attempt ended at.
    fn response(&self, raw: RawResponse) -> Response {
        let url = self.redirected_to.as_ref().unwrap_or(&self.request.url);
        Response::new(raw, self.attempts, self.elapsed())
            .answered_from(url, self.redirected_to.is_some())
    }

    /// The error, with the last response attached and a message naming method and URL.
    fn unavailable(&mut self, kind: UnavailableKind, reason: String) -> Unavailable {
        self.ended(Err(kind));
        let (last_failure, failure_detail) = match &self.last {
            Some(Err(e)) => (Some(e.kind), format!(" [{e}]")),
            _ => (None, String::new()),
        };
        let last_response = match self.last.take() {
            Some(Ok(raw)) => Some(self.response(raw)),
            _ => None,
        };
        let plural = if self.attempts == 1 { "" } else { "s" };
        let message = format!(
            "{} {}: {reason} ({} attempt{plural} in {}){}",
            self.request.method,
            self.url(),
            self.attempts,
            fmt_duration(self.elapsed()),
            failure_detail
        );
        Unavailable::new(kind, self.attempts, last_response, last_failure, message)
    }
}

/// What the decisions before an attempt (the budget's, the guards') may spend asking a backend
/// (Redis) when `left` remains and the attempt starts after `delay`: the rest once the attempt
/// has its least useful time. A backend takes at most half of it (`resilient_redis`), so a slow
/// Redis asked with a short deadline leaves the attempt room to go out under
/// `on_backend_error` 'open' or 'local', instead of eating the half the attempt needed.
fn time_for_guards(left: Duration, delay: Duration, policy: &Policy) -> Duration {
    left.saturating_sub(delay.saturating_add(policy.min_useful_attempt()))
}

/// Asks every guard in order; on the first refusal the permits already given are dropped.
fn admit_all(
    guards: &[Arc<dyn Guard>],
    number: u32,
    now_ms: u64,
) -> Result<Vec<Permit>, (Refusal, &Arc<dyn Guard>)> {
    let mut permits = Vec::with_capacity(guards.len());
    for guard in guards {
        permits.push(guard.admit(number, now_ms).map_err(|r| (r, guard))?);
    }
    Ok(permits)
}
