//! The adaptive concurrency limit (funnel `'limit' => 'auto'`): one limit per name, learned
//! from every attempt's latency and drops by every process of the host, in shared memory.
//!
//! Mechanism here, policy in [`policy`]. Every attempt's end costs two atomic adds to the
//! current interval's sums (`window_counts`, `window_latency`) and two loads; the interval
//! ends at the first attempt that ends after it is due (at least [`MIN_INTERVAL_MS`] and
//! 2 × the last mean latency, and at least [`MIN_SAMPLES`] attempts). That process reads the
//! sums, asks the policy for the next limit and installs it with one compare-and-swap on
//! `state` (`interval_start:40 | limit × 256:24`), which also starts the next interval, so
//! exactly one process closes each interval; it then subtracts what it read from the sums
//! (attempts that ended meanwhile stay for the next interval) and stores the estimates.
//! A process stopped or killed between the CAS and those stores leaves the estimates one
//! interval old: they are estimates, the limit itself is always one consistent word.
//!
//! A limit is judged only by the attempts it admitted: after a cut, an attempt that started
//! before it is not counted (`cut_ms`). Those attempts were let in by the higher limit and
//! still carry its queue (or its timeouts); counting them would cut again for the same queue,
//! interval after interval, down to the floor (TCP reacts once per round trip for the same
//! reason). The same after a probe ends: the attempts it admitted found a shorter queue.
//!
//! Different processes may configure different bounds for one name: each clamps what it
//! reads to its own `[min, max]`.

pub mod policy;

use crate::layout::{AdaptiveBlock, MAX_FUNNEL_LIMIT};
use crate::{Error, Segment};
use policy::{Bounds, Estimates, Window};
use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;

/// The shortest interval.
pub const MIN_INTERVAL_MS: u64 = 100;
/// The longest interval (a slow upstream's 2 × rtt is capped here).
pub const MAX_INTERVAL_MS: u64 = 2_000;
/// Attempts an interval needs before it closes (unless 10 intervals passed).
pub const MIN_SAMPLES: u32 = 3;
/// Fixed point of the stored limit: 1/256 of a slot.
const LIMIT_ONE: f64 = 256.0;
const LIMIT_BITS: u32 = 24;
const LIMIT_MASK: u64 = (1 << LIMIT_BITS) - 1;
/// One attempt's latency is capped at this (µs, ~17 min) so the 40-bit sum cannot overflow.
const LATENCY_CAP_US: u64 = (1 << 30) - 1;
const LATENCY_BITS: u32 = 40;

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
    fn bounds(&self) -> Bounds {
        Bounds {
            min: self.min as f64,
            max: self.max as f64,
        }
    }
}

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
    /// The last interval's mean latency, µs (0: none yet).
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

pub(crate) fn pack_state(start_ms: u64, limit: f64) -> u64 {
    let fp = (limit * LIMIT_ONE)
        .round()
        .clamp(LIMIT_ONE, LIMIT_MASK as f64) as u64;
    (start_ms << LIMIT_BITS) | fp
}

fn state_limit(state: u64) -> f64 {
    (state & LIMIT_MASK) as f64 / LIMIT_ONE
}

fn state_start(state: u64) -> u64 {
    state >> LIMIT_BITS
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
            state_limit(state)
        };
        limit.clamp(self.config.min as f64, self.config.max as f64)
    }

    /// The funnel's cap now: the learned limit's whole slots.
    pub fn cap(&self) -> u32 {
        self.current().floor() as u32
    }

    /// Learns from one attempt that ended at `now_ms`. Two atomic adds and two loads; the
    /// attempt that ends an interval also computes and installs the next limit.
    pub fn record(&self, sample: Sample, now_ms: u64) {
        let b = self.block();
        let started_ms = now_ms.saturating_sub(sample.latency_us / 1000);
        if started_ms < b.cut_ms.load(Relaxed) {
            return; // admitted under the limit before the last cut
        }
        let rtt = b.rtt.load(Relaxed);
        if !policy::teaches(&sample, (rtt >> 32) as u32) {
            return; // cut short by its caller: says nothing of the upstream
        }
        let latency = if sample.drop {
            0
        } else {
            sample.latency_us.min(LATENCY_CAP_US)
        };
        b.window_counts
            .fetch_add(1 | (sample.drop as u64) << 32, Relaxed);
        b.window_latency.fetch_add(
            latency | (sample.inflight.min(MAX_FUNNEL_LIMIT) as u64) << LATENCY_BITS,
            Relaxed,
        );
        let state = b.state.load(Acquire);
        if state == 0 {
            // First attempt ever: the interval starts now, at `initial`.
            let _ = b.state.compare_exchange(
                0,
                pack_state(now_ms, self.config.initial as f64),
                AcqRel,
                Acquire,
            );
            return;
        }
        let due = state_start(state).saturating_add(interval_ms(rtt as u32));
        if now_ms >= due {
            self.close(state, now_ms);
        }
    }

    /// Ends the interval that `state` started, if enough attempts ended in it and no other
    /// process ended it first.
    fn close(&self, state: u64, now_ms: u64) {
        let b = self.block();
        let counts = b.window_counts.load(Acquire);
        let latency = b.window_latency.load(Acquire);
        let window = Window {
            samples: counts as u32,
            drops: (counts >> 32) as u32,
            latency_sum_us: latency & ((1 << LATENCY_BITS) - 1),
            inflight_sum: (latency >> LATENCY_BITS) as u32,
            duration_us: now_ms.saturating_sub(state_start(state)) * 1000,
        };
        let rtt = b.rtt.load(Relaxed);
        let trend = b.trend.load(Relaxed);
        let long_overdue =
            now_ms >= state_start(state).saturating_add(10 * interval_ms(rtt as u32));
        if window.samples < MIN_SAMPLES && !long_overdue {
            return;
        }
        let start = b.streak_start.load(Relaxed);
        let prev = Estimates {
            limit: state_limit(state),
            no_load_us: (rtt >> 32) as u32,
            rtt_us: rtt as u32,
            streak: (trend >> 56) as u8,
            ref_limit: (start >> 32) as f64 / LIMIT_ONE,
            ref_rtt_us: start as u32,
            unused_limit: b.unused_limit.load(Relaxed) as f64 / LIMIT_ONE,
            intervals: trend & ((1 << 56) - 1),
        };
        let next = policy::next(prev, window, self.config.bounds());
        let installed = pack_state(now_ms, next.limit);
        if b.state
            .compare_exchange(state, installed, AcqRel, Acquire)
            .is_err()
        {
            return; // another process closed it
        }
        b.window_counts.fetch_sub(counts, Relaxed);
        b.window_latency.fetch_sub(latency, Relaxed);
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
        b.trend
            .store((next.streak as u64) << 56 | (prev.intervals + 1), Release);
    }

    /// What the limit has learned (the limit within this config's bounds).
    pub fn stats(&self) -> AdaptiveStats {
        AdaptiveStats {
            limit_256ths: (self.current() * LIMIT_ONE) as u32,
            ..learned(self.block()).unwrap_or_default()
        }
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
