//! The circuit breaker: when an upstream fails most attempts, stop sending to it for a while,
//! then let exactly one probe across every process of the host find out whether it is back.
//!
//! One breaker per name and bucket width, in an entry of its own ([`BreakerBlock`]): a state word
//! (closed / open until a moment / half-open with one probe ticket, see [`state_word`]) and a
//! sliding window of counting buckets, as the retry budget's. The protocol ([`protocol`]) is
//! lock-free, every step one atomic operation; `model_check` (tests) explores every schedule of
//! small scenarios against it, processes killed at any step included.
//!
//! - **Closed**: attempts go through; each one's end is counted (a call; a failure only when
//!   the client would retry it: timeouts, connection errors, `retry_on` statuses, never a
//!   4xx). When `min_calls` were counted in the window and the failures reach
//!   `failure_ratio` of them, the breaker opens; it opens too after `consecutive_failures`
//!   failures in a row (by default `min_calls`), so a sudden outage after a healthy spell is
//!   not diluted by the successes still in the window.
//! - **Open** for `open_for` ± 20 % (jitter, so the hosts of a fleet do not probe in step):
//!   every attempt is refused at once, nothing is sent.
//! - **Half-open**: the first caller after the open period wins the one ticket (a CAS) and
//!   sends a probe; everyone else is still refused. The probe's success closes the breaker (and
//!   the window starts afresh), its failure opens it again. A probe that never reports (its
//!   process was killed, or it hangs) is given up at the ticket's bound (the attempt timeout and
//!   a margin): the next caller takes the ticket over and probes.
//!
//! Time is injected (`now_ms`, monotonic ms) and so is randomness (`jitter`, a uniform u64), so
//! the tests below are exact.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use resilient_core::{Admission, BreakerConfig, CircuitBreaker, Segment};
//! # let path = std::env::temp_dir().join(format!("resilient-doc-breaker-{}.shm", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let seg = Arc::new(Segment::open(&path, 4)?);
//! let s = Duration::from_secs;
//! let config = BreakerConfig::new(0.5, 2, s(10), s(5), s(1))?;
//! let breaker = CircuitBreaker::new(seg, "sap", config)?;
//! assert_eq!(breaker.admit(0), Admission::Closed);
//! breaker.record(true, 0, 0, 0);
//! breaker.record(true, 0, 0, 0); // 2 calls, 2 failures: open for 5 s ± 20 %
//! assert!(matches!(breaker.admit(1), Admission::Refused { .. }));
//! let Admission::Probe { ticket, .. } = breaker.admit(6_000) else { panic!() };
//! assert!(matches!(breaker.admit(6_000), Admission::Refused { .. }), "one probe");
//! breaker.resolve(ticket, true, 6_010, 0);
//! assert_eq!(breaker.admit(6_010), Admission::Closed);
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(test)]
mod model_check;
mod protocol;
mod state_word;

use crate::layout::{BreakerBlock, BREAKER_BUCKETS};

use crate::pause::run;
use crate::{validate, Error, Segment};
use protocol::ThisProcess;
pub use state_word::Phase;
use state_word::StateWord;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// How far the open period is spread around `open_for`: ± 20 %.
pub const OPEN_JITTER: f64 = 0.2;

/// A breaker's settings. Private fields: [`BreakerConfig::new`] is the only way to make one.
///
/// ```compile_fail
/// let c = resilient_core::BreakerConfig { failure_ratio: 0.5, min_calls: 0, window_ms: 0, open_ms: 0, probe_ms: 0, consecutive_failures: 0 };
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BreakerConfig {
    failure_ratio: f64,
    min_calls: u32,
    window_ms: u64,
    open_ms: u64,
    probe_ms: u64,
    consecutive_failures: u32,
}

impl BreakerConfig {
    /// The most calls a window can require (a bucket counts up to 2^20 - 1).
    pub const MAX_MIN_CALLS: u32 = 1_000_000;

    /// `failure_ratio` in (0, 1]; `min_calls` 1 to 1,000,000; `window`, `open_for` and
    /// `probe_timeout` (how long a probe may stay silent before its ticket is given up) at
    /// least 1 ms and at most a year. A window under 20 ms counts as 20 ms (one ms a bucket).
    /// Each of the window's 20 buckets counts its first 2^20 − 1 calls (and their failures),
    /// then none: past about 35,000 calls a second on one host with a 10-minute window (a
    /// sixth of that with a 1-hour one), the ratio is that of a sample.
    pub fn new(
        failure_ratio: f64,
        min_calls: u32,
        window: Duration,
        open_for: Duration,
        probe_timeout: Duration,
    ) -> Result<Self, Error> {
        if !(failure_ratio > 0.0 && failure_ratio <= 1.0) {
            return Err(Error::invalid_argument(
                "failure_ratio",
                format!("must be greater than 0 and at most 1, got {failure_ratio}"),
            ));
        }
        calls("min_calls", min_calls)?;
        let ms = |name: &str, d: Duration| -> Result<u64, Error> {
            let d = validate::positive_duration(name, d)?;
            if d < Duration::from_millis(1) {
                return Err(Error::invalid_argument(
                    name,
                    format!("must be at least 1 ms, got {d:?}"),
                ));
            }
            Ok(d.as_millis() as u64)
        };
        Ok(BreakerConfig {
            failure_ratio,
            min_calls,
            window_ms: ms("window", window)?,
            open_ms: ms("open_for", open_for)?,
            probe_ms: ms("probe_timeout", probe_timeout)?,
            consecutive_failures: min_calls,
        })
    }

    /// Also open after `n` failures in a row (no success between, across every process), 1 to
    /// 1,000,000; `min_calls` unless set. Why: after a healthy spell the window is full of
    /// successes, so a sudden outage needs as many failures again to reach a ratio of 0.5,
    /// all sent to an upstream that is down; a streak of `n` says the same as a ratio of 1
    /// over the last `n` calls, at once.
    pub fn with_consecutive_failures(mut self, n: u32) -> Result<Self, Error> {
        self.consecutive_failures = calls("consecutive_failures", n)?;
        Ok(self)
    }

    pub fn failure_ratio(&self) -> f64 {
        self.failure_ratio
    }
    pub fn min_calls(&self) -> u32 {
        self.min_calls
    }
    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }
    pub fn open_for(&self) -> Duration {
        Duration::from_millis(self.open_ms)
    }
    pub fn probe_timeout(&self) -> Duration {
        Duration::from_millis(self.probe_ms)
    }
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// The width of one of the window's buckets, ms (at least 1): rounded up, so the buckets
    /// cover the whole window.
    pub fn bucket_ms(&self) -> u64 {
        self.window_ms.div_ceil(BREAKER_BUCKETS as u64).max(1)
    }

    /// What a breaker is kept under beside its name, `breaker/500ms`: its bucket width. Its
    /// buckets and streak are counted in epochs of that width, so breakers of one name whose
    /// windows differ (a web client's 10 s, a queue job's 60 s) are breakers of their own,
    /// as budgets are: in one place, each took the other's counts for old ones and reset them.
    pub fn key(&self) -> String {
        format!("breaker/{}ms", self.bucket_ms())
    }

    fn epoch(&self, now_ms: u64) -> u64 {
        now_ms / self.bucket_ms()
    }

    /// An open period's length: `open_for` × (1 ± [`OPEN_JITTER`]), `jitter` a uniform u64;
    /// at least 1 ms.
    pub fn open_ms(&self, jitter: u64) -> u64 {
        let u = (jitter >> 11) as f64 / (1u64 << 53) as f64; // [0, 1)
        let factor = 1.0 + OPEN_JITTER * (2.0 * u - 1.0);
        ((self.open_ms as f64 * factor).round() as u64).max(1)
    }

    /// The end of an open period starting at `now_ms` ([`BreakerConfig::open_ms`]).
    fn open_until(&self, now_ms: u64, jitter: u64) -> u64 {
        now_ms.saturating_add(self.open_ms(jitter))
    }
}

/// A count of calls, 1 to [`BreakerConfig::MAX_MIN_CALLS`] (a bucket counts up to 2^20 - 1).
fn calls(name: &str, n: u32) -> Result<u32, Error> {
    if !(1..=BreakerConfig::MAX_MIN_CALLS).contains(&n) {
        return Err(Error::invalid_argument(
            name,
            format!(
                "must be an integer between 1 and {}, got {n}",
                BreakerConfig::MAX_MIN_CALLS
            ),
        ));
    }
    Ok(n)
}

/// The probe's right to decide: the half-open word that granted it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ticket(StateWord);

impl Ticket {
    /// When the ticket is given up if its probe has not reported (monotonic ms).
    pub fn bound_ms(&self) -> u64 {
        self.0.at_ms()
    }
    /// The ticket as one word, and back: for a store that keeps a breaker elsewhere (Redis)
    /// and issues tickets of its own kind.
    pub fn to_word(self) -> u64 {
        self.0 .0
    }
    pub fn from_word(word: u64) -> Ticket {
        Ticket(StateWord(word))
    }
    /// Whether this ticket was granted by the admission right after `returned` was given back
    /// (two transitions later): the caller that gave it back asking again, not a new period.
    pub fn retakes(self, returned: Ticket) -> bool {
        let next = returned.0.next(Phase::Open, 0).next(Phase::HalfOpen, 0);
        self.0.generation() == next.generation()
    }
}

/// What [`CircuitBreaker::admit`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Closed: send, then [`CircuitBreaker::record`] how it ended.
    Closed,
    /// Half-open and this caller holds the host's one probe ticket: send, then
    /// [`CircuitBreaker::resolve`]. `took_over`: the previous probe was given up.
    Probe { ticket: Ticket, took_over: bool },
    /// Open, or half-open with a probe out: do not send. `until_ms`: when asking again may
    /// help (the open period's end or the probe's bound).
    Refused { until_ms: u64 },
    /// The store keeping the state could not be asked (a backend such as Redis did not
    /// answer) and its `on_backend_error` refuses: do not send. The breaker's state is
    /// unknown, not open. Never from shared memory.
    Unreachable,
}

/// A change of state, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transition {
    /// Closed → open: the failure ratio was reached.
    Opened,
    /// Open → half-open: a probe was let through.
    HalfOpened,
    /// Half-open → half-open: a silent probe was given up and another let through.
    ProbeGivenUp,
    /// Half-open → closed: the probe succeeded.
    Closed,
    /// Half-open → open: the probe failed.
    Reopened,
}

impl Transition {
    /// `opened`, `half_opened`, `probe_given_up`, `closed`, `reopened` (metric labels).
    pub fn as_str(self) -> &'static str {
        match self {
            Transition::Opened => "opened",
            Transition::HalfOpened => "half_opened",
            Transition::ProbeGivenUp => "probe_given_up",
            Transition::Closed => "closed",
            Transition::Reopened => "reopened",
        }
    }
}

/// The breaker's state as metrics show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BreakerState {
    pub phase: Phase,
    /// Open: until when; half-open: the probe's bound; closed: since when.
    pub at_ms: u64,
    /// Calls and failures counted in the window now (since the breaker last closed).
    pub calls: u64,
    pub failures: u64,
}

/// A named circuit breaker bound to a segment.
#[derive(Clone)]
pub struct CircuitBreaker {
    seg: Arc<Segment>,
    entry: usize,
    config: BreakerConfig,
}

impl CircuitBreaker {
    /// The breaker of `name` and its window's bucket width ([`BreakerConfig::key`]): an entry
    /// of its own, as a budget's.
    pub fn new(seg: Arc<Segment>, name: &str, config: BreakerConfig) -> Result<Self, Error> {
        validate::name("name", name)?;
        // The separator is a control character, which no validated name contains.
        let entry = seg.entry_index_unchecked(&format!("{name}\u{1f}{}", config.key()))?;
        Ok(CircuitBreaker { seg, entry, config })
    }

    pub fn config(&self) -> BreakerConfig {
        self.config
    }

    /// May an attempt go out now? Never waits.
    pub fn admit(&self, now_ms: u64) -> Admission {
        run(protocol::admit(
            self.block(),
            &ThisProcess,
            &self.config,
            now_ms,
        ))
    }

    /// An attempt admitted while closed, sent at `started_ms`, ended; `failure`: the client
    /// would retry it. One sent before the breaker last closed is not counted: it tells of the
    /// outage the probe has seen end; nor one that ends while it is open or half-open (the
    /// window starts afresh at the close), nor one whose `now_ms` is a window or more behind
    /// what another process already counted. `jitter`: a uniform random u64, used if this
    /// opens it.
    pub fn record(
        &self,
        failure: bool,
        started_ms: u64,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        run(protocol::record(
            self.block(),
            &ThisProcess,
            &self.config,
            failure,
            (started_ms, now_ms),
            jitter,
        ))
    }

    /// The probe holding `ticket` ended. `None`: its ticket had been given up, nothing changed.
    pub fn resolve(
        &self,
        ticket: Ticket,
        success: bool,
        now_ms: u64,
        jitter: u64,
    ) -> Option<Transition> {
        run(protocol::resolve(
            self.block(),
            &ThisProcess,
            &self.config,
            ticket,
            success,
            now_ms,
            jitter,
        ))
    }

    /// The probe holding `ticket` ended without an outcome (refused by another guard, or its
    /// call cancelled): the next caller may probe at once. False: it had been given up.
    pub fn give_back(&self, ticket: Ticket, now_ms: u64) -> bool {
        run(protocol::give_back(
            self.block(),
            &ThisProcess,
            ticket,
            now_ms,
        ))
    }

    /// Where the breaker stands (reads only).
    pub fn state(&self, now_ms: u64) -> BreakerState {
        let b = self.block();
        let w = StateWord(b.state.load(Ordering::Acquire));
        let (calls, failures) = match w.phase() {
            Phase::Closed => protocol::window(b, &self.config, w, now_ms),
            _ => (0, 0),
        };
        BreakerState {
            phase: w.phase(),
            at_ms: w.at_ms(),
            calls,
            failures,
        }
    }

    fn block(&self) -> &BreakerBlock {
        &self.seg.entry(self.entry).breaker
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MID: u64 = 1 << 63; // jitter 0: exactly open_for

    /// A fresh segment of this test's own, and its file (removed by the test at its end).
    fn segment(tag: &str) -> (Arc<Segment>, std::path::PathBuf) {
        let p = std::env::temp_dir().join(format!(
            "resilient-breaker-{tag}-{}.shm",
            std::process::id()
        ));
        let _ = std::fs::remove_file(&p);
        (Arc::new(Segment::open(&p, 8).unwrap()), p)
    }

    fn breaker(tag: &str, ratio: f64, min_calls: u32) -> (CircuitBreaker, std::path::PathBuf) {
        let (seg, p) = segment(tag);
        let s = Duration::from_secs;
        let config = BreakerConfig::new(ratio, min_calls, s(10), s(5), s(1)).unwrap();
        (CircuitBreaker::new(seg, "up", config).unwrap(), p)
    }

    fn refused(a: Admission) -> bool {
        matches!(a, Admission::Refused { .. })
    }

    #[test]
    fn opens_once_min_calls_were_seen_and_the_ratio_is_reached() {
        let (b, p) = breaker("threshold", 0.5, 20);
        let t = 1_000_000;
        // 19 failures: not enough calls yet.
        for _ in 0..19 {
            assert_eq!(b.record(true, t, t, MID), None);
        }
        assert_eq!(b.admit(t), Admission::Closed);
        // The 20th call, a failure: 20 of 20.
        assert_eq!(b.record(true, t, t, MID), Some(Transition::Opened));
        assert!(refused(b.admit(t)));
        let state = b.state(t);
        assert_eq!((state.phase, state.at_ms), (Phase::Open, t + 5_000));
        std::fs::remove_file(p).unwrap();
    }

    /// One name, two windows (a web client's 10 s, a queue job's 60 s): their buckets and
    /// streak were counted in one block, each config in epochs of its own width, so each took
    /// the other's for old ones and reset them. A failure every 5 s, the two taking turns,
    /// never opened it in an hour (720 in a row); one window opens at the 20th. Another window
    /// is another breaker, as another window is another budget.
    #[test]
    fn two_windows_of_one_name_each_count_their_own_calls() {
        let (seg, p) = segment("windows");
        let s = Duration::from_secs;
        let config = |window| BreakerConfig::new(0.5, 10, s(window), s(5), s(1)).unwrap();
        let web = CircuitBreaker::new(seg.clone(), "up", config(10)).unwrap();
        let queue = CircuitBreaker::new(seg, "up", config(60)).unwrap();
        let t = 1_000_000_000;
        let mut opened = [None, None];
        for i in 0..40u64 {
            let (which, b) = if i % 2 == 0 { (0, &web) } else { (1, &queue) };
            let now = t + i * 1_000;
            if b.admit(now) == Admission::Closed {
                b.record(true, now, now, MID);
            } else if opened[which].is_none() {
                opened[which] = Some(i);
            }
        }
        assert_eq!(
            opened,
            [Some(20), Some(21)],
            "each opened after its own 10 failures"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn successes_keep_it_closed_below_the_ratio() {
        let (b, p) = breaker("ratio", 0.5, 10);
        let b = CircuitBreaker {
            config: b.config.with_consecutive_failures(1_000).unwrap(),
            ..b
        };
        let t = 50_000;
        for _ in 0..50 {
            b.record(false, t, t, MID);
        }
        for _ in 0..49 {
            assert_eq!(
                b.record(true, t, t, MID),
                None,
                "under half of the calls failed"
            );
        }
        assert_eq!(b.admit(t), Admission::Closed);
        assert_eq!(
            b.record(true, t, t, MID),
            Some(Transition::Opened),
            "50 of 100"
        );
        std::fs::remove_file(p).unwrap();
    }

    /// A bucket counts its first 2^20 − 1 calls and their failures, then nothing more: the
    /// ratio stays that of the calls counted. Before, the calls stopped at the cap while the
    /// failures went on, and 1 failure in 4 opened a breaker of ratio 0.5 (a long window at a
    /// high rate: a day at 243 calls a second on one host).
    #[test]
    fn a_full_bucket_keeps_its_ratio() {
        let (b, p) = breaker("full", 0.5, 10);
        let b = CircuitBreaker {
            config: b.config.with_consecutive_failures(1_000_000).unwrap(),
            ..b
        };
        let t = 70_000;
        for i in 0..2_200_000u32 {
            assert_eq!(
                b.record(i % 4 == 0, t, t, MID),
                None,
                "call {i}: 1 in 4 failed"
            );
        }
        assert_eq!(b.admit(t), Admission::Closed);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_streak_opens_it_though_the_window_is_still_healthy() {
        let (b, p) = breaker("streak", 0.5, 20);
        let t = 200_000;
        for _ in 0..500 {
            b.record(false, t, t, MID);
        }
        // A sudden outage: 19 failures in a row, 19 of 519 in the window.
        for _ in 0..19 {
            assert_eq!(b.record(true, t + 1, t + 1, MID), None);
        }
        // A success breaks the streak; 19 more are not 20 in a row.
        b.record(false, t + 1, t + 1, MID);
        for _ in 0..19 {
            assert_eq!(b.record(true, t + 2, t + 2, MID), None);
        }
        assert_eq!(b.record(true, t + 2, t + 2, MID), Some(Transition::Opened));
        // The probe's success closes it and starts the streak afresh.
        let Admission::Probe { ticket, .. } = b.admit(t + 5_002) else {
            panic!("a probe after open_for")
        };
        assert_eq!(
            b.resolve(ticket, true, t + 5_003, MID),
            Some(Transition::Closed)
        );
        for _ in 0..19 {
            assert_eq!(b.record(true, t + 5_004, t + 5_004, MID), None);
        }
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn the_streak_length_is_a_setting() {
        let s = Duration::from_secs;
        let c = BreakerConfig::new(0.5, 20, s(10), s(5), s(1)).unwrap();
        assert_eq!(c.consecutive_failures(), 20, "min_calls unless set");
        assert_eq!(
            c.with_consecutive_failures(3)
                .unwrap()
                .consecutive_failures(),
            3
        );
        for bad in [0, BreakerConfig::MAX_MIN_CALLS + 1] {
            let e = c.with_consecutive_failures(bad).unwrap_err();
            assert_eq!(e.argument(), Some("consecutive_failures"));
        }
    }

    /// A breaker as [`breaker`], open for only 100 ms (a close within a bucket of its opening).
    fn quick_to_close(tag: &str) -> (CircuitBreaker, std::path::PathBuf) {
        let (b, p) = breaker(tag, 0.5, 5);
        let ms = Duration::from_millis;
        let config = BreakerConfig::new(0.5, 5, ms(10_000), ms(100), ms(1_000)).unwrap();
        (CircuitBreaker { config, ..b }, p)
    }

    #[test]
    fn a_close_starts_the_window_afresh_within_the_bucket_it_opened_in() {
        // Buckets of 500 ms: the failures that opened it, the probe and the close all fall in
        // one bucket.
        let (b, p) = quick_to_close("same-bucket");
        let t = 1_000_000;
        for _ in 0..4 {
            assert_eq!(b.record(true, t, t, MID), None);
        }
        assert_eq!(b.record(true, t, t, MID), Some(Transition::Opened));
        let Admission::Probe { ticket, .. } = b.admit(t + 150) else {
            panic!("a probe after open_for")
        };
        assert_eq!(
            b.resolve(ticket, true, t + 160, MID),
            Some(Transition::Closed)
        );
        let s = b.state(t + 160);
        assert_eq!(
            (s.calls, s.failures),
            (0, 0),
            "nothing counted since the close"
        );
        assert_eq!(
            b.record(true, t + 200, t + 200, MID),
            None,
            "1 call is under min_calls"
        );
        assert_eq!(b.admit(t + 200), Admission::Closed);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn an_attempt_sent_before_the_close_is_not_counted_after_it() {
        let (b, p) = quick_to_close("stale");
        let t = 2_000_000;
        for _ in 0..5 {
            b.record(true, t, t, MID);
        }
        let Admission::Probe { ticket, .. } = b.admit(t + 150) else {
            panic!("a probe after open_for")
        };
        assert_eq!(
            b.resolve(ticket, true, t + 160, MID),
            Some(Transition::Closed)
        );
        // Five attempts sent at t (before the outage was seen) time out after the close.
        for _ in 0..5 {
            assert_eq!(
                b.record(true, t, t + 2_000, MID),
                None,
                "from an earlier closed period"
            );
        }
        assert_eq!(b.admit(t + 2_000), Admission::Closed);
        let s = b.state(t + 2_000);
        assert_eq!((s.calls, s.failures), (0, 0));
        // One sent after the close counts.
        b.record(false, t + 1_000, t + 2_000, MID);
        assert_eq!(b.state(t + 2_000).calls, 1);
        std::fs::remove_file(p).unwrap();
    }

    /// A hung upstream and one caller: each failure takes its timeout, so a run of
    /// `consecutive_failures` can last longer than the window. It still opens the breaker:
    /// the run goes on while each failure follows the one before within the window.
    #[test]
    fn a_run_of_failures_longer_than_the_window_opens_it() {
        let (b, p) = breaker("long-run", 0.5, 5);
        let t = 100_000;
        for i in 0..4 {
            let at = t + i * 4_000;
            assert_eq!(b.record(true, at, at, MID), None, "failure {i}");
        }
        // 16 s after the first, 4 s after the last: the fifth in a row.
        assert_eq!(
            b.record(true, t + 16_000, t + 16_000, MID),
            Some(Transition::Opened)
        );
        std::fs::remove_file(p).unwrap();
    }

    /// A process that read its clock a window or more ago (paused since) records its attempt:
    /// the place of its bucket holds a newer one now, which it must not reset. Before, the
    /// newer bucket (9 calls, 9 failures) was replaced by the late one, out of the window: the
    /// 10th failure found 1 call and the breaker stayed closed.
    #[test]
    fn a_record_a_window_late_leaves_the_newer_bucket() {
        let (b, p) = breaker("late-record", 0.5, 10);
        let b = CircuitBreaker {
            config: b.config.with_consecutive_failures(1_000).unwrap(),
            ..b
        };
        let t = 1_000_000;
        for i in 0..9 {
            assert_eq!(b.record(true, t + i, t + i, MID), None);
        }
        // 10 s late: the same bucket of the ring, one lap behind.
        assert_eq!(b.record(false, t - 10_100, t - 10_000, MID), None);
        let s = b.state(t + 20);
        assert_eq!((s.calls, s.failures), (9, 9));
        assert_eq!(
            b.record(true, t + 30, t + 30, MID),
            Some(Transition::Opened),
            "10 of 10 failed"
        );
        std::fs::remove_file(p).unwrap();
    }

    /// The same for the streak: a failure a window late is not the start of a new run.
    #[test]
    fn a_failure_a_window_late_leaves_the_newer_streak() {
        let (b, p) = breaker("late-failure", 0.5, 1_000);
        let b = CircuitBreaker {
            config: b.config.with_consecutive_failures(5).unwrap(),
            ..b
        };
        let t = 1_000_000;
        for i in 0..4 {
            assert_eq!(b.record(true, t + i, t + i, MID), None);
        }
        assert_eq!(b.record(true, t - 10_100, t - 10_000, MID), None);
        assert_eq!(
            b.record(true, t + 30, t + 30, MID),
            Some(Transition::Opened),
            "the fifth failure in a row"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn old_failures_leave_the_window() {
        let (b, p) = breaker("slide", 0.5, 4);
        let t = 100_000;
        for _ in 0..3 {
            b.record(true, t, t, MID);
        }
        // 10 s later those three are gone: one more failure is 1 call, under min_calls, and
        // a streak of 1 (the failure before it left the window).
        assert_eq!(b.record(true, t + 10_000, t + 10_000, MID), None);
        assert_eq!(b.state(t + 10_000).calls, 1);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn stays_open_for_open_for_then_one_probe() {
        let (b, p) = breaker("open", 1.0, 1);
        let t = 10_000;
        assert_eq!(b.record(true, t, t, MID), Some(Transition::Opened));
        assert_eq!(
            b.admit(t + 4_999),
            Admission::Refused {
                until_ms: t + 5_000
            }
        );
        let Admission::Probe { ticket, took_over } = b.admit(t + 5_000) else {
            panic!("half-open at the end of open_for")
        };
        assert!(!took_over);
        assert_eq!(
            ticket.bound_ms(),
            t + 6_000,
            "given up after the probe bound (1 s)"
        );
        for _ in 0..100 {
            assert!(refused(b.admit(t + 5_500)), "one probe only");
        }
        assert_eq!(
            b.resolve(ticket, true, t + 5_600, MID),
            Some(Transition::Closed)
        );
        assert_eq!(b.admit(t + 5_600), Admission::Closed);
        assert_eq!(b.state(t + 5_600).calls, 0, "the window starts afresh");
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn the_open_period_is_jittered_by_twenty_percent() {
        let (b, p) = breaker("jitter", 1.0, 1);
        let c = b.config();
        assert_eq!(c.open_until(0, 0), 4_000, "-20 %");
        assert_eq!(c.open_until(0, MID), 5_000);
        assert_eq!(c.open_until(0, u64::MAX), 6_000, "+20 % (just under)");
        // Opened with the lowest jitter, the breaker half-opens after 4 s, not 5.
        b.record(true, 0, 0, 0);
        assert!(refused(b.admit(3_999)));
        assert!(matches!(b.admit(4_000), Admission::Probe { .. }));
        // Spread: 1000 draws cover the range evenly.
        let mut seed = 0x1234_5678_9abc_def0u64;
        let ends: Vec<u64> = (0..1000)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                c.open_until(0, seed)
            })
            .collect();
        assert!(ends.iter().all(|&e| (4_000..=6_000).contains(&e)));
        assert!(ends.iter().filter(|&&e| e < 4_500).count() > 150);
        assert!(ends.iter().filter(|&&e| e > 5_500).count() > 150);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_failed_probe_reopens() {
        let (b, p) = breaker("reopen", 1.0, 1);
        b.record(true, 0, 0, MID);
        let Admission::Probe { ticket, .. } = b.admit(5_000) else {
            panic!()
        };
        assert_eq!(
            b.resolve(ticket, false, 5_100, MID),
            Some(Transition::Reopened)
        );
        assert_eq!(b.admit(5_100), Admission::Refused { until_ms: 10_100 });
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_lost_probe_is_given_up_after_its_bound() {
        let (b, p) = breaker("lost", 1.0, 1);
        b.record(true, 0, 0, MID);
        let Admission::Probe { ticket: lost, .. } = b.admit(5_000) else {
            panic!()
        };
        // Its process was killed: it never reports. Until the bound, nobody probes.
        assert_eq!(b.admit(5_999), Admission::Refused { until_ms: 6_000 });
        let Admission::Probe { ticket, took_over } = b.admit(6_000) else {
            panic!("given up at the bound")
        };
        assert!(took_over);
        assert!(refused(b.admit(6_000)), "still one probe at a time");
        // The lost probe's late report decides nothing.
        assert_eq!(b.resolve(lost, true, 6_100, MID), None);
        assert!(refused(b.admit(6_100)));
        assert_eq!(
            b.resolve(ticket, true, 6_200, MID),
            Some(Transition::Closed)
        );
        assert_eq!(b.admit(6_200), Admission::Closed);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn a_ticket_given_back_lets_the_next_caller_probe_at_once() {
        let (b, p) = breaker("give-back", 1.0, 1);
        b.record(true, 0, 0, MID);
        let Admission::Probe { ticket, .. } = b.admit(5_000) else {
            panic!()
        };
        assert!(b.give_back(ticket, 5_001));
        assert!(matches!(
            b.admit(5_002),
            Admission::Probe {
                took_over: false,
                ..
            }
        ));
        assert!(
            !b.give_back(ticket, 5_003),
            "an old ticket gives nothing back"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn threads_at_the_half_open_moment_get_one_probe() {
        let (b, p) = breaker("threads", 1.0, 1);
        b.record(true, 0, 0, MID);
        let probes = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        if let Admission::Probe { .. } = b.admit(5_000) {
                            probes.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(probes.load(Ordering::SeqCst), 1);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn validation_names_the_argument() {
        let s = Duration::from_secs;
        let arg = |r: Result<BreakerConfig, Error>| r.unwrap_err().argument().map(str::to_owned);
        assert_eq!(
            arg(BreakerConfig::new(0.0, 1, s(1), s(1), s(1))).as_deref(),
            Some("failure_ratio")
        );
        assert_eq!(
            arg(BreakerConfig::new(f64::NAN, 1, s(1), s(1), s(1))).as_deref(),
            Some("failure_ratio")
        );
        assert_eq!(
            arg(BreakerConfig::new(0.5, 0, s(1), s(1), s(1))).as_deref(),
            Some("min_calls")
        );
        assert_eq!(
            arg(BreakerConfig::new(0.5, 1, Duration::ZERO, s(1), s(1))).as_deref(),
            Some("window")
        );
        assert_eq!(
            arg(BreakerConfig::new(
                0.5,
                1,
                s(1),
                Duration::from_micros(10),
                s(1)
            ))
            .as_deref(),
            Some("open_for")
        );
        assert_eq!(
            arg(BreakerConfig::new(0.5, 1, s(1), s(1), Duration::ZERO)).as_deref(),
            Some("probe_timeout")
        );
        let tiny = BreakerConfig::new(1.0, 1, Duration::from_millis(5), s(1), s(1)).unwrap();
        assert_eq!(tiny.bucket_ms(), 1);
    }

    /// Bucket tags are the epoch's low 24 bits. An outage opens the breaker, a probe closes it
    /// (the outage's bucket is then out of the window: `since`), and the name is idle. Exactly
    /// 2^24 buckets later (97 days at a 10 s window, 4.7 hours at 20 ms) the outage's bucket
    /// has the current epoch's tag again, but sits at another index than that epoch's (2^24 mod
    /// 20 = 16): it is not counted. Before, it was, and the first call, a failure, opened the
    /// breaker on a window of 1 call.
    #[test]
    fn a_bucket_2_pow_24_epochs_old_is_not_counted_again() {
        let (b, p) = breaker("tagwrap", 0.5, 20);
        let t0 = 1_000_000;
        let mut opened = None;
        for _ in 0..20 {
            opened = opened.or(b.record(true, t0, t0, MID));
        }
        assert_eq!(opened, Some(Transition::Opened));
        let t_probe = t0 + 5_000;
        let Admission::Probe { ticket, .. } = b.admit(t_probe) else {
            panic!("a probe after open_for")
        };
        assert_eq!(
            b.resolve(ticket, true, t_probe + 10, MID),
            Some(Transition::Closed)
        );
        let closed = b.state(t_probe + 10);
        assert_eq!(
            (closed.phase, closed.calls, closed.failures),
            (Phase::Closed, 0, 0)
        );
        // Idle for 2^24 buckets of 500 ms.
        let t1 = t0 + (1u64 << 24) * b.config().bucket_ms();
        let seen = b.state(t1);
        let first = b.record(true, t1, t1, MID);
        let after = b.state(t1);
        std::fs::remove_file(p).unwrap();
        assert!(
            (seen.calls, seen.failures) == (0, 0) && first.is_none(),
            "2^24 buckets after the outage the window shows {} calls, {} failures; the first \
             call's failure gives {:?} (now {:?} until {})",
            seen.calls,
            seen.failures,
            first,
            after.phase,
            after.at_ms
        );
    }

    /// The streak's tag was 24 bits too: 4 failures of 5 in a row, the name idle for 2^24 + 3
    /// buckets (9.7 days at a 1 s window), and one failure was read as the 5th in a row (the
    /// last "3 buckets ago") and opened the breaker. With 40 bits it starts a new streak.
    #[test]
    fn a_streak_2_pow_24_epochs_old_is_not_lengthened() {
        let (seg, p) = segment("streakwrap");
        let config = BreakerConfig::new(
            0.5,
            1_000,
            Duration::from_secs(1),
            Duration::from_secs(5),
            Duration::from_secs(1),
        )
        .unwrap()
        .with_consecutive_failures(5)
        .unwrap();
        let b = CircuitBreaker::new(seg, "up", config).unwrap();
        let t0 = 1_000_000;
        for _ in 0..4 {
            assert_eq!(b.record(true, t0, t0, MID), None);
        }
        let t1 = t0 + ((1u64 << 24) + 3) * config.bucket_ms();
        let first = b.record(true, t1, t1, MID);
        let after = b.state(t1);
        std::fs::remove_file(p).unwrap();
        assert!(
            first.is_none(),
            "one failure after {} days idle: {:?}, the breaker {:?} until {}",
            (t1 - t0) / 86_400_000,
            first,
            after.phase,
            after.at_ms
        );
    }
}
