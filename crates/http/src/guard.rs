//! The seam every admission guard plugs into: asked before each attempt, told its outcome after.
//!
//! The attempt loop holds an ordered list of [`Guard`]s (the circuit breaker's, then the
//! funnel's, whose learned limit rides on it) and knows them only through this trait and
//! [`Refusal`]: a guard that refuses as the funnel does (`Full`) or as the breaker does
//! (`CircuitOpen`) is a new type implementing [`Guard`], put in the list when the client is
//! built, with no edit to the loop; a refusal of another kind is a new [`Refusal`] variant,
//! which the loop then handles (docs/architecture.md, "Adding a guard").
//!
//! Before an attempt the loop asks each guard in order for a [`Permit`]; the first
//! [`Refusal`] stops admission (permits already given are dropped, so released). After the
//! attempt the permits are ended first, told how it ended (a slot is never held into a sleep;
//! a learned limit keeps an abandoned attempt's slot counted a while, without this process),
//! then each guard that admitted it is told how it ended ([`Guard::ended`]).
//!
//! The retry budget is not a guard: it decides whether a *retry* may go out, not whether an
//! attempt is admitted. It sits behind [`RetryAllowance`], chosen once when the client is built.

use std::time::{Duration, Instant};

use crate::decision::{fmt_duration, Outcome};
use crate::transport::FailureKind;

/// Permission for one attempt. Whatever it holds (a funnel slot) is given back exactly once:
/// when the loop ends it with the attempt's outcome ([`Permit::end`]), or when it is dropped
/// (an attempt never sent, or a call abandoned mid-way).
#[must_use = "dropping a permit releases what it holds"]
#[derive(Default)]
pub struct Permit {
    release: Option<Release>,
    /// When what it holds lapses, if bounded: its attempt must be over by then; and what
    /// lapses then, for a failure it cut short.
    lapses: Option<(Instant, &'static str)>,
}

/// A closure told how the attempt ended (`None`: dropped without one).
type Closure = Box<dyn FnOnce(Option<&Ended>) + Send>;

/// What a permit runs when it ends (told how) or is dropped (`None`).
enum Release {
    Closure(Closure),
    /// A function and two words for it: no allocation, for a permit every attempt takes (the
    /// metrics' in-flight count).
    Plain(fn(usize, u64), usize, u64),
}

impl Release {
    fn run(self, ended: Option<&Ended>) {
        match self {
            Release::Closure(f) => f(ended),
            Release::Plain(f, a, b) => f(a, b),
        }
    }
}

/// How the attempt a permit admitted ended, for a guard whose release depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    pub outcome: Outcome,
    /// How long the attempt took.
    pub duration: std::time::Duration,
    /// The loop's clock when it ended (monotonic ms).
    pub now_ms: u64,
    /// The call's deadline cut the attempt's timeout below the policy's own (the client's, a
    /// request's, a web cap): a timeout then tells of the caller's budget more than of the
    /// upstream.
    pub cut_short: bool,
    /// What the client's own settings give an attempt: its timeout (a request's own, under
    /// the web cap), or the client's `deadline` when shorter. An attempt cut well below it
    /// was cut by one caller's lack of time ([`Ended::cut_early`]).
    pub allowed: std::time::Duration,
}

impl Ended {
    /// The deadline ended the attempt: its timeout was cut to what was left, and it timed out.
    pub fn by_deadline(&self) -> bool {
        self.cut_short && self.outcome == Outcome::Failed(FailureKind::Timeout)
    }

    /// The deadline ended the attempt before it had waited half of what the client's own
    /// settings give one ([`Ended::allowed`]): a caller short of time (an enclosing
    /// `Deadline::within`, a retry late in its call), which says little of the upstream.
    pub fn cut_early(&self) -> bool {
        self.by_deadline() && self.duration < self.allowed / 2
    }
}

/// What a funnel slot's permit says lapses, for an attempt its lease cut short.
pub const FUNNEL_LEASE: &str = "the funnel's lease (option 'funnel.lease')";

impl Permit {
    /// A permit that holds nothing (a guard that only observes or only refuses).
    pub fn free() -> Self {
        Self::default()
    }
    /// A permit that runs `release` when it ends or is dropped.
    pub fn holding(release: impl FnOnce() + Send + 'static) -> Self {
        Self::ending(move |_| release())
    }
    /// A permit that calls `release(a, b)` when it ends or is dropped, allocating nothing.
    pub fn calling(release: fn(usize, u64), a: usize, b: u64) -> Self {
        Self {
            release: Some(Release::Plain(release, a, b)),
            lapses: None,
        }
    }
    /// A permit that runs `release` with how its attempt ended (`None`: dropped without one).
    pub fn ending(release: impl FnOnce(Option<&Ended>) + Send + 'static) -> Self {
        Self {
            release: Some(Release::Closure(Box::new(release))),
            lapses: None,
        }
    }
    /// The permit, for an attempt that must be over within `d` from now: the loop cuts the
    /// attempt's timeout to what is left of it when the attempt starts (after the guards that
    /// admit it next, a Redis round trip each), so an attempt never outlives what admitted it
    /// (a funnel slot's lease, a probe's ticket). `what` names it, and the option that sets
    /// it, for the message of an attempt it cut short (`the funnel's lease (option
    /// 'funnel.lease')`).
    pub fn lasting(mut self, d: Duration, what: &'static str) -> Self {
        if let Some(at) = Instant::now().checked_add(d) {
            if self.lapses.is_none_or(|(l, _)| at < l) {
                self.lapses = Some((at, what));
            }
        }
        self
    }
    /// What is left of the time its attempt may last, if bounded.
    pub fn lasts(&self) -> Option<Duration> {
        self.lasts_for().map(|(d, _)| d)
    }
    /// [`Permit::lasts`], with what lapses then.
    pub fn lasts_for(&self) -> Option<(Duration, &'static str)> {
        self.lapses
            .map(|(at, what)| (at.saturating_duration_since(Instant::now()), what))
    }
    /// Gives back what the permit holds, told how its attempt ended.
    pub fn end(mut self, ended: &Ended) {
        if let Some(f) = self.release.take() {
            f.run(Some(ended));
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(f) = self.release.take() {
            f.run(None);
        }
    }
}

/// Why a guard refused an attempt. Nothing was sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// No free slot now (the funnel): the loop may ask again, polling, for up to the policy's
    /// `funnel_wait`, then fails as *funnel full*.
    Full,
    /// The circuit is open: fail fast as *circuit open*, without waiting.
    CircuitOpen,
    /// The backend keeping the guard's state (Redis) did not answer and `on_backend_error` is
    /// 'closed': refused as the guard's own refusal is (`FunnelFull`, waited on as `Full` is;
    /// `CircuitOpen`, at once), which is what callers catch, with a message that says why
    /// instead of what the guard's state does not say.
    BackendDown(crate::UnavailableKind),
}

/// An admission guard. Must not block: `admit` answers at once.
pub trait Guard: Send + Sync {
    /// Asked before attempt `attempt` (1-based) of a call.
    fn admit(&self, attempt: u32, now_ms: u64) -> Result<Permit, Refusal>;
    /// Why it is full now, in numbers, for the message of a call it refused (`7 of 10 slots
    /// in flight; ...`); `None` when it cannot say cheaply.
    fn why_full(&self, _now_ms: u64) -> Option<String> {
        None
    }
    /// Why its backend gave no answer to the admission it just refused as
    /// [`Refusal::BackendDown`] (`Redis: connection refused`), for the call's message; asked
    /// right after that admission, on the same thread. Never a URL or a secret.
    fn why_down(&self) -> Option<String> {
        None
    }
    /// Told how an attempt this guard admitted ended, after its permit was dropped: the
    /// outcome, when, how long it took and whether the deadline cut it short (the breaker
    /// counts outcomes; the funnel's learned limit needs the rest too).
    fn ended(&self, _end: &Ended) {}
}

/// The retry budget: originals deposit, retries withdraw.
pub trait RetryAllowance: Send + Sync {
    fn record_original(&self, now_ms: u64);
    /// May one retry go out now? Counts it when yes.
    fn try_consume(&self, now_ms: u64) -> bool;
    /// A retry `try_consume(consumed_at_ms)` counted was never sent (a guard refused it after
    /// its backoff; `now_ms` on the same clock): taken off the count where it was counted.
    fn give_back(&self, consumed_at_ms: u64, now_ms: u64) {
        let _ = (consumed_at_ms, now_ms);
    }
    /// What the budget held when it refused a retry, for the call's message: a budget shared
    /// beyond the process is found spent by a caller that made no retry yet. Never a URL or a
    /// secret.
    fn refused_because(&self, _now_ms: u64) -> Option<String> {
        None
    }
}

impl RetryAllowance for resilient_core::RetryBudget {
    fn record_original(&self, now_ms: u64) {
        resilient_core::RetryBudget::record_original(self, now_ms)
    }
    fn try_consume(&self, now_ms: u64) -> bool {
        resilient_core::RetryBudget::try_consume(self, now_ms)
    }
    fn give_back(&self, consumed_at_ms: u64, _now_ms: u64) {
        resilient_core::RetryBudget::give_back(self, consumed_at_ms)
    }
    fn refused_because(&self, now_ms: u64) -> Option<String> {
        let (stats, config) = (self.stats(now_ms), self.config());
        let allowed = format!("{:.2}", stats.allowed);
        Some(format!(
            "a retry would make {} in the last {}, over the {} allowed (floor {} + ratio {} × {} originals), counted by every process of this host",
            stats.retries + 1,
            fmt_duration(config.window()),
            allowed.trim_end_matches('0').trim_end_matches('.'),
            config.floor(),
            config.ratio(),
            stats.originals,
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a permit allows runs from when it was given, not from when the attempt starts:
    /// the guards after it (a Redis round trip each) and the budget take their time first.
    #[test]
    fn a_permits_time_runs_from_when_it_was_given() {
        let ms = Duration::from_millis;
        let permit = Permit::free().lasting(ms(200), "a").lasting(ms(500), "b");
        std::thread::sleep(ms(50));
        let (lasts, what) = permit.lasts_for().expect("bounded");
        assert!(lasts <= ms(150), "{lasts:?}");
        assert_eq!(what, "a", "the earlier bound is the one that lapses");
        assert_eq!(Permit::free().lasts(), None);
        assert_eq!(Permit::free().lasting(Duration::MAX, "c").lasts(), None);
    }
}
