//! The rule that turns one interval's samples into the next limit. Pure: no shared memory,
//! no clock; [`super::AdaptiveLimit`] is the mechanism that feeds it.
//!
//! A blend of AIMD on drops and a gradient on latency, each guarding the other's known flaw:
//!
//! - **Drops first** (timeouts, connection errors, 429, 503; a timeout the call's deadline
//!   made only when the attempt had at least `TOLERANCE × no_load` to answer, see
//!   [`teaches`]): an interval with any drop
//!   multiplies the limit by `1 − drop ratio`, clamped to `[0.5, 0.9]`. So every drop lowers the
//!   limit (Gradient2 ignores drops, concurrency-limits issue 137), by at least 10 %; and when
//!   an overloaded upstream sheds the excess, `L × (1 − shed share)` lands near what it accepts.
//!   No increase in an interval with drops.
//! - **Latency otherwise**: `gradient = TOLERANCE × no_load / rtt`. Above 1 (no queue worth
//!   the name) the limit grows by `√L` while no queue shows (rtt ≤ 1.1 × no_load, in this
//!   interval and the last: the first one after a cut only shows that the cut went below the
//!   capacity), by 1 otherwise, and only if the callers use 80 % of it (else a quiet hour would
//!   teach it `max`); a limit they use less comes down toward `use / 0.8 + 1` by 10 % an
//!   interval (an untested limit would let in a queue of its size when the capacity falls).
//!   Below 1 it becomes `L × max(gradient, 0.5) + QUEUE_ALLOWANCE`: for `L`
//!   above the upstream's `C` slots, rtt ≈ no_load × L / C, so this lands on
//!   `TOLERANCE × C + 0.5` in one step: every slot busy, and a queue at the upstream of
//!   `0.25 × C + 0.5`, below `C` for every `C ≥ 1`.
//! - **no_load** (the latency without queueing) follows a lower rtt at once (but not one of an
//!   interval whose sums disagree, [`Window::torn`]: too low by an answer). A higher one is
//!   adopted only when it proves not to be ours (the Vegas trap: a latency step taken for a
//!   queue drives the limit to its floor and keeps it there): when the limit sits at its floor,
//!   or when [`REBASELINE_AFTER`] latency-driven cuts (of 5 % or more, or with the latency
//!   over twice the tolerated) took the limit down by a quarter while the rtt stayed within
//!   10 % (a move either way starts the count again; an rtt still climbing from the last
//!   interval's starts none: after a fall in capacity the queue is still building, and the
//!   cuts that follow would look unmoved beside it). A queue of our own shrinks when we
//!   shrink the limit; a slower upstream does not. And at once when the rtt is more than
//!   any queue of ours could make ([`a_slower_upstream`]: a light load that a latency step
//!   piles up), the limit of before coming back.
//! - **Probes**: the latency rule holds a limit where `L × gradient + 0.5 ≈ L`: at the
//!   equilibrium of a queue of ours, and also when no_load is too low while no queue of ours
//!   exists (an upstream that slowed in steps, or one interval that mixed the answers of
//!   before and after a step: 70 ms learnt, 120 ms now, a limit of 3 held on 4 slots for good).
//!   Nothing above tells them apart, and a hold never cuts. So a hold probes on every
//!   [`PROBE_EVERY`]-th interval: the limit drops by [`PROBE_SHARE`] for one interval, and if
//!   the rtt does not move, the queue was not ours and no_load is re-learnt. Either way the
//!   limit of before comes back. When every attempt of an interval ended alone (a limit under 2,
//!   or a light load), no queue of ours can exist at all: its rtt is adopted as the floor's.
//!
//!   Known limit: a no_load re-learnt too high (a slowdown and a queue of ours at once) is
//!   corrected only when the rtt falls below it or the limit reaches its floor; until then
//!   the queue at the upstream is longer than the tolerance.

use super::Sample;

/// How much latency over no-load counts as "no queue": 25 %.
pub const TOLERANCE: f64 = 1.25;
/// The most one interval may cut on latency (halving).
pub const MIN_GRADIENT: f64 = 0.5;
/// Bounds of the multiplicative decrease on drops.
pub const DROP_FACTOR_MIN: f64 = 0.5;
pub const DROP_FACTOR_MAX: f64 = 0.9;
/// Cuts on latency that did not lower it, in a row, before no_load is re-learnt...
pub const REBASELINE_AFTER: u8 = 2;
/// ...once they took the limit to this share of where they began.
pub const REBASELINE_CUT: f64 = 0.75;
/// A rtt within this factor of no_load shows no queue: grow by √L rather than 1.
const NO_QUEUE: f64 = 1.1;
/// The callers must use this share of the limit's whole slots (on average) for it to grow.
const USED_SHARE: f64 = 0.8;
/// How fast a limit the callers leave unused comes down toward their use, per interval.
const UNUSED_DECAY: f64 = 0.9;
/// A hold probes on every this many intervals (of the name's count)...
pub const PROBE_EVERY: u64 = 5;
/// ...by dropping the limit to this share of its whole slots, rounded down, for one interval.
/// A queue of ours at the equilibrium (`⌊1.25 C + 0.5⌋` in flight) then shortens by more than
/// the 10 % that tells (`1 / 0.85`), and the probe still keeps every slot the upstream has
/// (`⌊0.85 × ⌊1.25 C + 0.5⌋⌋ ≥ C`): it costs the queue, not throughput.
pub const PROBE_SHARE: f64 = 0.85;
/// `streak` while a probe runs...
const PROBING: u8 = u8::MAX;
/// ...and in the interval after it, which only shows the queue filling again: no growth.
const SETTLING: u8 = u8::MAX - 1;
/// A new limit below this share of the last one is a cut (the small moves around the
/// equilibrium are not; an unused limit's 10 % step down is, which only makes the next
/// interval wait for attempts sent after it).
pub const CUT: f64 = 0.95;
/// Slots over `TOLERANCE × C` the latency rule leaves: a little queue, so a slot that frees
/// never waits for the next caller.
pub const QUEUE_ALLOWANCE: f64 = 0.5;

/// Whether an attempt's end tells anything of the upstream's queue. A timeout the call's
/// deadline made shorter than `TOLERANCE × no_load` does not: even an idle upstream would not
/// have answered in time, so the caller's budget ended it, not a queue (a page that spent its
/// budget elsewhere would otherwise cut the limit every caller of the host shares). Such an
/// attempt is neither a drop nor a latency. A timeout of the attempt's own (the client's or a
/// request's `timeout`) is the caller's word on what is too slow: always a drop. Before a
/// no-load latency is known (0) the deadline's timeouts teach nothing: they cannot be told
/// from those an idle upstream would make too, and on a fresh name pages with tight deadlines
/// would take the limit to its floor before any answer came.
pub fn teaches(sample: &Sample, no_load_us: u32) -> bool {
    !sample.deadline_cut
        || (no_load_us > 0 && sample.latency_us as f64 >= TOLERANCE * no_load_us as f64)
}

/// One interval's sums.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Window {
    /// Attempts that ended in the interval (drops included).
    pub samples: u32,
    /// Of them: timeouts, connection errors, 429, 503.
    pub drops: u32,
    /// Latency of the other attempts, summed, µs.
    pub latency_sum_us: u64,
    /// In flight when each attempt ended, summed.
    pub inflight_sum: u32,
    /// The interval's length, µs (0: not known; the use is then read from `inflight_sum`).
    pub duration_us: u64,
    /// The latency sum does not hold the latencies of exactly the answers counted: an attempt's
    /// count and latency fell either side of a close (see `super::sums`), and the rtt is off by
    /// about one answer. No lower no-load latency is learnt from it.
    pub torn: bool,
}

impl Window {
    /// How many slots the callers used, on average: what the attempts saw in flight as they
    /// ended, or the answers' latencies over the interval's length (Little's law), the larger.
    /// The first is low for attempts that start together and end one after another (a
    /// `pool()`: 2 in flight then 1 for a limit of 2 it fills); the second counts their time.
    /// An answer longer than the interval began before it: the length is taken as at least
    /// their mean latency, so that one slow answer in a short interval (the first, which starts
    /// when the first attempt ends) does not count as many slots.
    fn used(&self) -> f64 {
        let seen = self.inflight_sum as f64 / self.samples as f64;
        let answers = self.samples.saturating_sub(self.drops);
        if self.duration_us == 0 || answers == 0 {
            return seen;
        }
        let span = self
            .duration_us
            .max(self.latency_sum_us / u64::from(answers));
        seen.max(self.latency_sum_us as f64 / span as f64)
    }
}

/// What is learned, carried from interval to interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Estimates {
    pub limit: f64,
    /// The latency without queueing, µs; 0 = not known yet.
    pub no_load_us: u32,
    /// The last interval's mean latency (answers only), µs; 0 = none yet.
    pub rtt_us: u32,
    /// Latency-driven cuts since the rtt last came down by 10 % (0: not cutting; at most
    /// [`REBASELINE_AFTER`]), or [`PROBING`] or [`SETTLING`].
    pub streak: u8,
    /// The limit and the rtt when that streak began, or of the hold a probe left.
    pub ref_limit: f64,
    pub ref_rtt_us: u32,
    /// The limit the last interval without a cut installed, when the callers left it unused
    /// (0: they used it, or drops came since). Cuts only lower the limit, so no more than its
    /// whole slots were in flight since: the bound on any queue of ours that
    /// [`a_slower_upstream`] compares the rtt with.
    pub unused_limit: f64,
    /// Intervals closed before this one (by every process): when a hold probes.
    pub intervals: u64,
}

/// Whether a hold probes now: on every [`PROBE_EVERY`]-th interval, when the callers fill the
/// limit and the probe takes whole slots from them (else the rtt could not move, queue of
/// ours or not).
fn probe_due(prev: &Estimates, used: f64, bounds: Bounds) -> bool {
    let cap = prev.limit.floor();
    prev.intervals % PROBE_EVERY == PROBE_EVERY - 1
        && used >= cap * USED_SHARE
        && probe(prev.limit, bounds) < cap
}

/// The limit a probe runs at.
fn probe(limit: f64, bounds: Bounds) -> f64 {
    (limit.floor() * PROBE_SHARE).floor().max(bounds.min)
}

/// Whether the rtt is more than any queue of ours could make: with at most `⌊unused_limit⌋`
/// attempts in flight and an upstream of at least one slot, each waits behind at most
/// `⌊unused_limit⌋ − 1` others, so a rtt over `TOLERANCE × no_load × ⌊unused_limit⌋` means the
/// upstream itself got slower. Only a limit the callers left unused is a bound worth using:
/// one they filled may hide a queue the upstream's speed cannot be told from.
fn a_slower_upstream(prev: &Estimates, rtt_us: u32) -> bool {
    prev.unused_limit >= 1.0
        && prev.no_load_us > 0
        && rtt_us as f64 > TOLERANCE * prev.no_load_us as f64 * prev.unused_limit.floor()
}

/// The limit's bounds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bounds {
    pub min: f64,
    pub max: f64,
}

/// Whether the attempts that started before `next` was installed must not judge it: after a
/// cut (they carry the higher limit's queue) and when a probe ends (they found its shorter
/// one: counted, the restored limit would grow past its hold at once).
pub fn judged_afresh(prev: &Estimates, next: &Estimates) -> bool {
    next.limit < prev.limit * CUT || prev.streak == PROBING
}

/// The estimates after `window`.
pub fn next(prev: Estimates, w: Window, bounds: Bounds) -> Estimates {
    let mut e = judge(prev, w, bounds);
    if w.torn && (prev.no_load_us == 0 || e.no_load_us < prev.no_load_us) {
        // Its rtt is off by about one answer, too low as often as too high; a no-load latency
        // learnt too low would stay (only a higher one has to prove itself).
        e.no_load_us = prev.no_load_us;
    }
    e
}

/// [`next`] before the check of a torn window.
fn judge(prev: Estimates, w: Window, bounds: Bounds) -> Estimates {
    let mut e = prev;
    if w.samples == 0 {
        return e;
    }
    let answers = w.samples.saturating_sub(w.drops);
    if answers > 0 {
        e.rtt_us = (w.latency_sum_us / answers as u64).clamp(1, u32::MAX as u64) as u32;
    }
    if w.drops > 0 {
        let ratio = w.drops as f64 / w.samples as f64;
        let factor = (1.0 - ratio).clamp(DROP_FACTOR_MIN, DROP_FACTOR_MAX);
        // During a probe, from the limit it left (the probe's own is no judgement).
        let from = if prev.streak == PROBING {
            prev.ref_limit
        } else {
            prev.limit
        };
        e.limit = (from * factor).clamp(bounds.min, bounds.max);
        e.streak = 0;
        e.unused_limit = 0.0;
        if answers > 0 && (e.no_load_us == 0 || e.rtt_us < e.no_load_us) {
            e.no_load_us = e.rtt_us;
        }
        return e;
    }
    let rtt = e.rtt_us;
    if prev.streak == PROBING {
        // The interval after a probe. Its attempts were all admitted under the probe (the
        // mechanism counts none from before a cut): an rtt that did not move by 10 % shows
        // that the queue the hold saw was not ours; a lower one is the no-load latency at
        // once, as in any interval.
        let unmoved = (rtt as f64 - prev.ref_rtt_us as f64).abs() <= 0.1 * prev.ref_rtt_us as f64;
        if unmoved || rtt < e.no_load_us {
            e.no_load_us = rtt;
        }
        e.limit = prev.ref_limit.clamp(bounds.min, bounds.max);
        e.streak = SETTLING;
        return e;
    }
    let settling = prev.streak == SETTLING;
    let prev = Estimates {
        streak: if settling { 0 } else { prev.streak },
        ..prev
    };
    if a_slower_upstream(&prev, rtt) {
        // Not a queue of ours: the latency without queueing is this one now, and the limit
        // of before (the cuts made while the rtt climbed bought nothing) comes back.
        e.no_load_us = rtt;
        e.limit = prev
            .limit
            .max(prev.unused_limit)
            .clamp(bounds.min, bounds.max);
        e.streak = 0;
        e.unused_limit = 0.0;
        return e;
    }
    let at_floor = prev.limit <= bounds.min;
    // Every attempt ended alone (in flight: itself, as under a limit below 2): none queued
    // behind one of ours.
    let alone = w.inflight_sum <= w.samples;
    if e.no_load_us == 0 || rtt < e.no_load_us || at_floor || alone {
        e.no_load_us = rtt;
    }
    let gradient = TOLERANCE * e.no_load_us as f64 / rtt as f64;
    let used = w.used();
    if gradient >= 1.0 {
        e.streak = 0;
        let unused = used < prev.limit.floor() * USED_SHARE;
        if settling {
            // Left as the probe's end restored it.
        } else if !unused {
            // √L only after a second interval without a queue: the first one after a cut
            // only shows that the cut went below the capacity, and a √L step from there
            // overshoots it by as much (a small capacity: from 2 slots to 4).
            let no_queue = |rtt_us: u32| rtt_us as f64 <= NO_QUEUE * e.no_load_us as f64;
            let step = if no_queue(rtt) && no_queue(prev.rtt_us) {
                prev.limit.sqrt().max(1.0)
            } else {
                1.0
            };
            e.limit = prev.limit + step;
        } else {
            // A limit far above what the callers use was never tested, and when the upstream's
            // capacity falls it lets in a queue of that size before any interval can see it:
            // come down toward the use, 10 % an interval, keeping room for 25 % more and a slot.
            let room = used / USED_SHARE + 1.0;
            if prev.limit > room {
                e.limit = (prev.limit * UNUSED_DECAY).max(room);
            }
        }
        e.unused_limit = if unused {
            e.limit.clamp(bounds.min, bounds.max)
        } else {
            0.0
        };
    } else {
        let cut = prev
            .limit
            .min(prev.limit * gradient.max(MIN_GRADIENT) + QUEUE_ALLOWANCE);
        if cut < prev.limit * CUT || gradient <= MIN_GRADIENT {
            // A real cut. A queue of our own answers cuts with a lower rtt; a slower upstream
            // does not. The streak starts again whenever the rtt moved by 10 % either way
            // (down: the cuts worked; up: something else changed, judge from here).
            let moved = (rtt as f64 - prev.ref_rtt_us as f64).abs() > 0.1 * prev.ref_rtt_us as f64;
            // An rtt still climbing from the last interval's is no reference: the queue that
            // a higher limit let in (the capacity just fell) is still building, and the rtt of
            // the cuts that follow would look unmoved beside it.
            let climbing = prev.rtt_us > 0 && rtt as f64 > 1.1 * prev.rtt_us as f64;
            if climbing {
                e.streak = 0;
            } else if prev.streak == 0 || moved {
                e.ref_limit = prev.limit;
                e.ref_rtt_us = rtt;
                e.streak = 1;
            } else {
                e.streak = (prev.streak + 1).min(REBASELINE_AFTER);
            }
            if e.streak >= REBASELINE_AFTER && prev.limit <= REBASELINE_CUT * e.ref_limit {
                // Cut by a quarter and more without the rtt moving: the upstream got slower,
                // and those cuts bought nothing: undo them.
                e.no_load_us = rtt;
                e.limit = prev.limit.max(e.ref_limit);
                e.streak = 0;
            } else {
                e.limit = cut;
            }
        } else if probe_due(&prev, used, bounds) {
            e.limit = probe(prev.limit, bounds);
            e.ref_limit = prev.limit;
            e.ref_rtt_us = rtt;
            e.streak = PROBING;
        } else {
            // Holding at the equilibrium `TOLERANCE × C + 0.5`: neither counts nor forgets.
            e.limit = cut;
        }
    }
    e.limit = e.limit.clamp(bounds.min, bounds.max);
    e
}

#[cfg(test)]
mod tests {
    use super::*;

    const B: Bounds = Bounds {
        min: 1.0,
        max: 64.0,
    };

    fn est(limit: f64, no_load_us: u32, rtt_us: u32) -> Estimates {
        Estimates {
            limit,
            no_load_us,
            rtt_us,
            streak: 0,
            ref_limit: 0.0,
            ref_rtt_us: 0,
            unused_limit: 0.0,
            intervals: 1,
        }
    }

    fn answers(n: u32, latency_us: u64, inflight: u32) -> Window {
        Window {
            samples: n,
            drops: 0,
            latency_sum_us: latency_us * n as u64,
            inflight_sum: inflight * n,
            duration_us: 0,
            torn: false,
        }
    }

    /// Attempts that start together and end one after another (a `pool()` filling a limit of
    /// 2) see 2 then 1 in flight as they end: 1.5, under the 80 % of the limit that lets it
    /// grow. Their latencies over the interval's length show both slots in use all the time.
    #[test]
    fn a_limit_a_pool_fills_grows() {
        // Two rounds of 2 attempts of 21 ms in an interval of 42 ms.
        let w = Window {
            samples: 4,
            drops: 0,
            latency_sum_us: 4 * 21_000,
            inflight_sum: 2 + 1 + 2 + 1,
            duration_us: 42_000,
            torn: false,
        };
        let e = next(est(2.0, 21_000, 21_000), w, B);
        assert!((e.limit - (2.0 + 2f64.sqrt())).abs() < 1e-9, "{e:?}");
        // Half as many rounds: one slot's worth in use, not grown.
        let w = Window {
            samples: 2,
            latency_sum_us: 2 * 21_000,
            inflight_sum: 2 + 1,
            ..w
        };
        assert_eq!(next(est(2.0, 21_000, 21_000), w, B).limit, 2.0);
        // One caller at a time, its first answer slow (1 s, then 40 ms twice) in an interval of
        // 100 ms: one slot used, not 10.8; a limit of 4 is not grown.
        let w = Window {
            samples: 3,
            latency_sum_us: 1_000_000 + 2 * 40_000,
            inflight_sum: 3,
            duration_us: 100_000,
            ..w
        };
        assert!(next(est(4.0, 0, 0), w, B).limit <= 4.0);
    }

    #[test]
    fn any_drop_lowers_the_limit_by_at_least_ten_percent() {
        let mut w = answers(100, 20_000, 8);
        w.samples += 1;
        w.drops = 1;
        let e = next(est(8.0, 20_000, 20_000), w, B);
        assert!((e.limit - 7.2).abs() < 1e-9, "{}", e.limit);
        let all = Window {
            samples: 10,
            drops: 10,
            ..Window::default()
        };
        assert_eq!(next(est(8.0, 20_000, 20_000), all, B).limit, 4.0);
    }

    #[test]
    fn a_queue_of_our_own_lands_on_tolerance_times_capacity_plus_a_half() {
        // 4 slots at 20 ms, 8 in flight: rtt 40 ms.
        let e = next(est(8.0, 20_000, 40_000), answers(50, 40_000, 8), B);
        assert!((e.limit - 5.5).abs() < 1e-9, "{}", e.limit);
    }

    #[test]
    fn an_unused_limit_does_not_grow_and_comes_down_toward_the_use() {
        let e = next(est(10.0, 20_000, 20_000), answers(50, 20_000, 2), B);
        assert_eq!(e.limit, 9.0, "10 % down");
        let e = next(est(3.6, 20_000, 20_000), answers(50, 20_000, 2), B);
        assert_eq!(e.limit, 3.5, "not under use / 0.8 + 1");
        let e = next(est(9.0, 20_000, 20_000), answers(50, 20_000, 7), B);
        assert_eq!(e.limit, 9.0, "7 of 9 used: within the room, held");
        let e = next(est(10.0, 20_000, 20_000), answers(50, 20_000, 9), B);
        assert!((e.limit - (10.0 + 10f64.sqrt())).abs() < 1e-9);
    }

    /// A pure latency step (100 → 300 ms, no queue of ours): the first cut, made while the rtt
    /// climbed, is not undone (after a fall in capacity such a cut is right); the two after it,
    /// which left the rtt where it climbed to, are, and no_load is re-learnt. Then √L growth.
    #[test]
    fn a_latency_step_undoes_the_cuts_after_the_climb() {
        let mut e = est(32.0, 100_000, 100_000);
        let mut limits = Vec::new();
        for _ in 0..4 {
            e = next(e, answers(50, 300_000, e.limit.floor() as u32), B);
            limits.push(e.limit);
        }
        assert_eq!(limits[..3], [16.5, 8.75, 16.5], "{limits:?}");
        assert_eq!(e.no_load_us, 300_000);
        assert!(
            (limits[3] - (16.5 + 16.5f64.sqrt())).abs() < 1e-9,
            "{limits:?}"
        );
    }

    /// An rtt over `TOLERANCE × no_load × ⌊unused limit⌋` is the upstream's: re-learnt, and
    /// the unused limit comes back; at the bound, or after a limit the callers filled, it is
    /// a queue like any other and cut.
    #[test]
    fn an_rtt_no_queue_of_ours_could_make_is_relearnt_at_once() {
        // 20 ms, one caller of a limit of 3: it is left unused (down to 2.7), and remembered.
        let light = next(est(3.0, 20_000, 20_000), answers(50, 20_000, 1), B);
        assert_eq!(light.unused_limit, light.limit);
        let filled = next(est(3.0, 20_000, 20_000), answers(50, 20_000, 3), B);
        assert_eq!(filled.unused_limit, 0.0);
        // Cut while the rtt climbed: the unused limit stays.
        let climbing = next(light, answers(20, 40_000, 2), B);
        assert!(climbing.limit < light.limit, "{climbing:?}");
        assert_eq!(climbing.unused_limit, light.unused_limit);
        // 120 ms with at most 2 in flight (⌊2.7⌋, the unused limit): over 1.25 × 20 × 2 = 50 ms.
        let e = next(climbing, answers(20, 120_000, 2), B);
        assert_eq!(e.no_load_us, 120_000);
        assert_eq!(e.limit, light.limit);
        assert_eq!((e.streak, e.unused_limit), (0, 0.0));
        // At the bound: still possibly ours.
        let e = next(climbing, answers(20, 50_000, 2), B);
        assert_eq!(e.no_load_us, 20_000);
        assert!(e.limit < climbing.limit);
        // The same step after a filled limit: a queue, cut.
        let e = next(
            next(filled, answers(20, 40_000, 3), B),
            answers(20, 120_000, 3),
            B,
        );
        assert_eq!(e.no_load_us, 20_000);
        // Drops forget the bound.
        let mut w = answers(20, 20_000, 1);
        w.drops = 5;
        assert_eq!(next(light, w, B).unused_limit, 0.0);
    }

    /// `intervals` of answers from an upstream of `slots` slots of 120 ms, with the limit's
    /// whole slots in flight; the limit after each.
    fn on_slots(mut e: Estimates, slots: u64, intervals: u64) -> (Estimates, Vec<f64>) {
        let mut limits = Vec::new();
        for i in 0..intervals {
            e.intervals = i;
            let n = e.limit.floor() as u32;
            e = next(e, answers(20, 120_000 * slots.max(n as u64) / slots, n), B);
            limits.push(e.limit);
        }
        (e, limits)
    }

    /// At the equilibrium of a queue of ours (2 slots, 3 in flight: rtt 1.5 × no_load) the
    /// hold probes: with 2 in flight the rtt falls, so no_load is kept and the limit of before
    /// comes back, without growing in the interval after; and the probe kept both slots busy.
    #[test]
    fn a_probe_of_our_own_queue_keeps_no_load_and_every_slot() {
        let (e, limits) = on_slots(est(3.3, 120_000, 180_000), 2, 3 * PROBE_EVERY);
        assert_eq!(e.no_load_us, 120_000, "{limits:?}");
        let probes = limits.iter().filter(|l| **l == 2.0).count();
        assert_eq!(probes as u64, 3, "{limits:?}");
        assert!(limits.iter().all(|l| (2.0..=3.3).contains(l)), "{limits:?}");
    }

    /// No queue of ours (4 slots, 3 in flight) but no_load learnt too low (82 ms for 120): the
    /// latency rule holds the limit at 3.3 for good. The probe's rtt does not move: no_load is
    /// re-learnt, and the limit grows to the capacity and its queue allowance.
    #[test]
    fn a_probe_relearns_a_no_load_learnt_too_low() {
        let (e, limits) = on_slots(est(3.3, 82_000, 120_000), 4, PROBE_EVERY + 1);
        assert_eq!(e.no_load_us, 120_000, "{limits:?}");
        let (_, limits) = on_slots(e, 4, 4);
        assert!(limits.iter().any(|l| *l >= 5.0), "{limits:?}");
    }

    /// The interval after a probe: an rtt under no_load is adopted as in any other, and a
    /// drop cuts from the limit the probe left, not from the probe's.
    #[test]
    fn a_probe_adopts_a_lower_rtt_and_a_drop_cuts_from_the_hold() {
        let probing = Estimates {
            streak: PROBING,
            ref_limit: 20.5,
            ref_rtt_us: 180_000,
            ..est(17.0, 140_000, 180_000)
        };
        let e = next(probing, answers(20, 132_000, 17), B);
        assert_eq!((e.no_load_us, e.limit), (132_000, 20.5));
        let mut w = answers(100, 150_000, 17);
        w.drops = 1;
        let e = next(probing, w, B);
        assert!((e.limit - 20.5 * 0.9).abs() < 1e-9, "{}", e.limit);
    }

    /// An interval whose sums disagree (an answer's count without its latency: rtt 80 ms for
    /// 100) teaches no lower no-load latency, nor a first one (an untorn one does).
    #[test]
    fn a_torn_window_lowers_no_no_load_latency() {
        let torn = Window {
            torn: true,
            ..answers(5, 80_000, 4)
        };
        assert_eq!(
            next(est(8.0, 100_000, 100_000), torn, B).no_load_us,
            100_000
        );
        assert_eq!(next(est(8.0, 0, 0), torn, B).no_load_us, 0);
        assert_eq!(
            next(
                est(8.0, 100_000, 100_000),
                Window {
                    torn: false,
                    ..torn
                },
                B
            )
            .no_load_us,
            80_000
        );
    }

    #[test]
    fn the_floor_adopts_the_latency_it_sees() {
        let e = next(est(1.0, 20_000, 120_000), answers(5, 120_000, 1), B);
        assert_eq!(e.no_load_us, 120_000);
        assert_eq!(e.limit, 2.0);
    }
}
