//! The adaptive concurrency limit (funnel `'limit' => 'auto'`): one limit per name, learned
//! from every attempt's latency and drops by every process of the host, in shared memory.
//!
//! Mechanism here, policy in [`policy`]. Every attempt's end costs two atomic adds to the
//! current interval's sums ([`sums`]) and a few loads; the interval ends at the first attempt
//! that ends after it is due (at least [`MIN_INTERVAL_MS`] and 2 × the last mean latency, and
//! at least [`MIN_SAMPLES`] attempts). That process reads the sums and the estimates and asks
//! the policy for the next limit; then it claims the close with one compare-and-swap on
//! `state` ([`state_word`]: the running word becomes its closing word, the limit unchanged),
//! so exactly one process closes each interval; it takes what it read out of the sums
//! (attempts that ended meanwhile stay for the next interval), stores the estimates and
//! publishes the next limit, which also starts the next interval. Until it publishes, no
//! other process closes anything: a closer paused in the middle, for as long as it may be,
//! finds the sums and estimates as it left them, and the next closer reads neither its
//! interval's sums nor older estimates (they were taken out and stored before). A closer
//! killed in the middle is told by its pid: the next attempt to end starts a new interval,
//! with the estimates as far as the dead closer stored them, and its interval's sums taken
//! out unread (they span its whole claim; as a funnel slot, a killed closer whose pid another
//! process took keeps the limit where it was until that process ends). The limit
//! itself is always one consistent word.
//!
//! A limit is judged only by the attempts it admitted: after a cut, an attempt that started
//! before it is not counted (`cut_ms`). Those attempts were let in by the higher limit and
//! still carry its queue (or its timeouts); counting them would cut again for the same queue,
//! interval after interval, down to the floor (TCP reacts once per round trip for the same
//! reason). The same after a probe ends: the attempts it admitted found a shorter queue.
//!
//! Different processes may configure different bounds for one name: the limit is learnt and
//! stored within `[1, 64]`, and each process clamps what it reads to its own `[min, max]`.

pub mod policy;
pub(crate) mod state_word;
mod sums;

use crate::layout::{AdaptiveBlock, MAX_FUNNEL_LIMIT};
use crate::liveness;
use crate::{Error, Segment};
use policy::{Bounds, Estimates};
pub(crate) use state_word::pack_state;
use state_word::{State, LIMIT_MASK, LIMIT_ONE};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;
use sums::Sums;

/// The shortest interval.
pub const MIN_INTERVAL_MS: u64 = 100;
/// The longest interval (a slow upstream's 2 × rtt is capped here).
pub const MAX_INTERVAL_MS: u64 = 2_000;
/// Attempts an interval needs before it closes (unless 10 intervals passed).
pub const MIN_SAMPLES: u32 = 3;

/// The bounds of a learned limit: `1 <= min <= initial <= max <= 64`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdaptiveConfig {
    min: u32,
    max: u32,
    initial: u32,
}

impl AdaptiveConfig {
    /// Defaults of the PHP option: `min` 1, `max` 64, `initial` 4 (clamped into the bounds).
    pub const DEFAULT_MIN: u32 = 1;
    pub const DEFAULT_MAX: u32 = MAX_FUNNEL_LIMIT;
    pub const DEFAULT_INITIAL: u32 = 4;

    /// Checked as PHP gives them (any int), each refused with the range it has.
    pub fn new(min: i64, max: i64, initial: i64) -> Result<Self, Error> {
        let top = i64::from(MAX_FUNNEL_LIMIT);
        if !(1..=top).contains(&min) {
            return Err(Error::invalid_argument(
                "min",
                format!("must be between 1 and {top}, got {min}"),
            ));
        }
        if !(min..=top).contains(&max) {
            return Err(Error::invalid_argument(
                "max",
                format!("must be between min ({min}) and {top}, got {max}"),
            ));
        }
        if !(min..=max).contains(&initial) {
            return Err(Error::invalid_argument(
                "initial",
                format!("must be between min ({min}) and max ({max}), got {initial}"),
            ));
        }
        // In 1..=64 now.
        let [min, max, initial] = [min, max, initial].map(|n| n as u32);
        Ok(AdaptiveConfig { min, max, initial })
    }

    pub fn min(&self) -> u32 {
        self.min
    }
    pub fn max(&self) -> u32 {
        self.max
    }
    pub fn initial(&self) -> u32 {
        self.initial
    }
}

/// The bounds of the limit stored for every process of a name. A process's own `[min, max]`
/// clamps only what it reads ([`AdaptiveLimit::current`]): stored, a job configured with
/// `min` 12 would lift every other caller's limit to 12, into an upstream that refuses them.
const STORED: Bounds = Bounds {
    min: 1.0,
    max: MAX_FUNNEL_LIMIT as f64,
};

/// How one attempt ended, as the limit learns from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    pub latency_us: u64,
    /// A timeout, a connection error, 429 or 503.
    pub drop: bool,
    /// Of the drops, a timeout the call's deadline made: the attempt was given up after
    /// `latency_us`, less than its own timeout. It tells of a queue only if the upstream had
    /// time to answer (see [`policy::teaches`]); a timeout of the attempt's own is a drop.
    pub deadline_cut: bool,
    /// Attempts in flight when it ended (its own included).
    pub inflight: u32,
}

/// What the limit has learned, for stats and metrics (integers as stored: `Eq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdaptiveStats {
    /// The learned limit in 1/256 of a slot (the funnel's cap is its whole slots).
    pub limit_256ths: u32,
    /// The slowly tracked latency without queueing, µs (0: none yet).
    pub no_load_rtt_us: u32,
    /// The mean latency of answers in the latest interval that had any, µs (0: none yet).
    pub rtt_us: u32,
    /// Intervals closed so far (by every process).
    pub intervals: u64,
}

impl AdaptiveStats {
    /// The learned limit, fractional.
    pub fn limit(&self) -> f64 {
        self.limit_256ths as f64 / LIMIT_ONE
    }
    pub fn no_load_rtt_ms(&self) -> f64 {
        self.no_load_rtt_us as f64 / 1000.0
    }
    pub fn rtt_ms(&self) -> f64 {
        self.rtt_us as f64 / 1000.0
    }
}

/// A name's learned limit in a segment.
#[derive(Clone)]
pub struct AdaptiveLimit {
    seg: Arc<Segment>,
    entry: usize,
    config: AdaptiveConfig,
}

/// The interval's length after a mean latency of `rtt_us`.
pub fn interval_ms(rtt_us: u32) -> u64 {
    (2 * rtt_us as u64 / 1000).clamp(MIN_INTERVAL_MS, MAX_INTERVAL_MS)
}

impl AdaptiveLimit {
    pub fn new(seg: Arc<Segment>, name: &str, config: AdaptiveConfig) -> Result<Self, Error> {
        let entry = seg.entry_index(name)?;
        Ok(AdaptiveLimit { seg, entry, config })
    }

    pub fn config(&self) -> AdaptiveConfig {
        self.config
    }

    fn block(&self) -> &AdaptiveBlock {
        &self.seg.entry(self.entry).adaptive
    }

    /// The learned limit, fractional, within this config's bounds: one load.
    pub fn current(&self) -> f64 {
        let state = self.block().state.load(Acquire);
        let limit = if state == 0 {
            self.config.initial as f64
        } else {
            state_word::limit(state)
        };
        limit.clamp(self.config.min as f64, self.config.max as f64)
    }

    /// The funnel's cap now: the learned limit's whole slots.
    pub fn cap(&self) -> u32 {
        self.current().floor() as u32
    }

    /// Learns from one attempt that ended at `now_ms`. Two atomic adds and a few loads; the
    /// attempt that ends an interval also computes and installs the next limit.
    pub fn record(&self, sample: Sample, now_ms: u64) {
        self.record_pausing(sample, now_ms, || {})
    }

    /// [`Self::record`], running `claimed` once this attempt claimed the close of the interval
    /// and before the close is done (tests replay other processes there).
    #[inline(always)]
    pub(crate) fn record_pausing(&self, sample: Sample, now_ms: u64, claimed: impl FnOnce()) {
        let b = self.block();
        let started_ms = now_ms.saturating_sub(sample.latency_us / 1000);
        if started_ms < b.cut_ms.load(Relaxed) {
            return; // admitted under the limit before the last cut
        }
        let rtt = b.rtt.load(Relaxed);
        if !policy::teaches(&sample, (rtt >> 32) as u32) {
            return; // cut short by its caller: says nothing of the upstream
        }
        let (counts, latency) = sums::added(&sample);
        b.window_counts.fetch_add(counts, Relaxed);
        b.window_latency.fetch_add(latency, Relaxed);
        let state = b.state.load(Acquire);
        match state_word::read(state) {
            State::Running { start_ms } => {
                if now_ms >= start_ms.saturating_add(interval_ms(rtt as u32)) {
                    self.close(state, start_ms, now_ms, claimed);
                }
            }
            State::NotStarted => {
                // First attempt ever: the interval starts now, at `initial`.
                let _ = b.state.compare_exchange(
                    0,
                    pack_state(now_ms, self.config.initial as f64),
                    AcqRel,
                    Acquire,
                );
            }
            State::Closing { pid } => self.take_over_if_dead(pid, state, now_ms, (counts, latency)),
        }
    }

    /// Ends the interval that began at `start_ms` (the running word `state`), if enough attempts
    /// ended in it and no other process claimed it first.
    fn close(&self, state: u64, start_ms: u64, now_ms: u64, claimed: impl FnOnce()) {
        let b = self.block();
        // As the last closer left them: it stored everything before it published `state`.
        let sums = Sums::load(b);
        let rtt = b.rtt.load(Relaxed);
        let trend = b.trend.load(Relaxed);
        let long_overdue = now_ms >= start_ms.saturating_add(10 * interval_ms(rtt as u32));
        if sums.samples() < MIN_SAMPLES && !long_overdue {
            return;
        }
        let start = b.streak_start.load(Relaxed);
        let prev = Estimates {
            limit: state_word::limit(state),
            no_load_us: (rtt >> 32) as u32,
            rtt_us: rtt as u32,
            streak: (trend >> 56) as u8,
            ref_limit: (start >> 32) as f64 / LIMIT_ONE,
            ref_rtt_us: start as u32,
            unused_limit: b.unused_limit.load(Relaxed) as f64 / LIMIT_ONE,
            intervals: trend & ((1 << 56) - 1),
        };
        // Sums no attempts add up to (a closer of an earlier build subtracted twice) are
        // taken out unread: the interval starts again, nothing learnt.
        let window = sums.window(now_ms.saturating_sub(start_ms) * 1000);
        let next = match window {
            Some(w) => policy::next(prev, w, STORED),
            None => prev,
        };
        let claim = state_word::closing(state, liveness::current_pid());
        if b.state
            .compare_exchange(state, claim, AcqRel, Acquire)
            .is_err()
        {
            return; // another process closes it
        }
        claimed();
        sums.take(b);
        b.rtt
            .store((next.no_load_us as u64) << 32 | next.rtt_us as u64, Relaxed);
        let ref_fp = (next.ref_limit * LIMIT_ONE) as u64;
        b.streak_start
            .store(ref_fp << 32 | next.ref_rtt_us as u64, Relaxed);
        b.unused_limit
            .store((next.unused_limit * LIMIT_ONE) as u64, Relaxed);
        if policy::judged_afresh(&prev, &next) {
            b.cut_ms.store(now_ms, Relaxed);
        }
        let intervals = prev.intervals + window.is_some() as u64;
        b.trend
            .store((next.streak as u64) << 56 | intervals, Release);
        // Only a process that found this one dead moves a claim on: then it has no say.
        let _ = b
            .state
            .compare_exchange(claim, pack_state(now_ms, next.limit), Release, Relaxed);
    }

    /// An interval being closed by process `pid` (the claim `state`): if that process died
    /// in the middle, starts a new interval at the limit of before. (While it is alive, if
    /// stopped, each attempt's end asks once: one `kill(pid, 0)` and a read of its
    /// `/proc/<pid>/stat`.) The sums the dead closer
    /// left are taken out unread: they span the whole time its claim stood (hours, if its pid
    /// was taken by a live process meanwhile), longer than the new interval the close would
    /// measure them against, so a sum that wrapped would pass for a short interval's. So the
    /// claim is taken over first, the sums taken out, this attempt's own adds (`own`, the new
    /// interval's first) put back, and only then the new interval published: a close of it
    /// never reads the old sums, whenever this process is paused. (The few attempts that end
    /// meanwhile go with the old sums; a taker that dies in between is taken over in turn.)
    #[cold]
    fn take_over_if_dead(&self, pid: u32, state: u64, now_ms: u64, own: (u64, u64)) {
        // A zombie too: its claim has no lease to end it, and would stand as long as the
        // zombie does.
        if liveness::pid_running(pid) {
            return;
        }
        let b = self.block();
        let claim = state_word::closing(state, liveness::current_pid());
        if b.state
            .compare_exchange(state, claim, AcqRel, Acquire)
            .is_err()
        {
            return; // another process took it over
        }
        Sums::load(b).take(b);
        b.window_counts.fetch_add(own.0, Relaxed);
        b.window_latency.fetch_add(own.1, Relaxed);
        let _ = b.state.compare_exchange(
            claim,
            pack_state(now_ms, state_word::limit(state)),
            Release,
            Relaxed,
        );
    }

    /// What the limit has learned (the limit within this config's bounds).
    pub fn stats(&self) -> AdaptiveStats {
        AdaptiveStats {
            limit_256ths: (self.current() * LIMIT_ONE) as u32,
            ..learned(self.block()).unwrap_or_default()
        }
    }
}

/// A close of `b`'s interval that a process now gone left unfinished (a file no process maps,
/// [`Segment`]'s `forget_processes`): a new interval starts at `now_ms` at the limit of before,
/// the old sums dropped, as [`AdaptiveLimit`] does for a closer found dead, which a pid the
/// kernel gave again would hide.
pub(crate) fn forget_closer(b: &AdaptiveBlock, now_ms: u64) {
    let state = b.state.load(Acquire);
    if let State::Closing { .. } = state_word::read(state) {
        b.window_counts.store(0, Relaxed);
        b.window_latency.store(0, Relaxed);
        b.state
            .store(pack_state(now_ms, state_word::limit(state)), Release);
    }
}

/// What a name's block has learned, whoever configured it; `None` before its first attempt.
/// (Inline: `Metrics::snapshot()` asks it of every name, most of which learned nothing.)
#[inline]
pub fn learned(b: &AdaptiveBlock) -> Option<AdaptiveStats> {
    let state = b.state.load(Acquire);
    if state == 0 {
        return None;
    }
    let rtt = b.rtt.load(Relaxed);
    let trend = b.trend.load(Acquire);
    Some(AdaptiveStats {
        limit_256ths: (state & LIMIT_MASK) as u32,
        no_load_rtt_us: (rtt >> 32) as u32,
        rtt_us: rtt as u32,
        intervals: trend & ((1 << 56) - 1),
    })
}

#[cfg(test)]
mod tests;
