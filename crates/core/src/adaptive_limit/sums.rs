//! The current interval's sums: two words every attempt's end adds to, and the closer of the
//! interval reads and then takes out (what ended in between stays for the next interval).
//!
//! - `window_counts` = `drops:32 | samples:32`.
//! - `window_latency` = `inflight_sum:24 | latency_sum:40`. Each answer (not a drop) adds its
//!   latency rounded to 8 µs, plus 1: the low 3 bits of the sum count the answers in it
//!   (mod 8), a check the closer compares with `samples − drops` of the other word. (Whole
//!   milliseconds stay exact: 1 ms is 125 × 8 µs.)
//!
//! One attempt's two adds are two instructions, and a close may read the words between them:
//! its count in one interval and its latency in the next (or the other way round). Each of those
//! intervals' rtt is then off by about one answer, and the check says so
//! ([`Window::torn`]): the policy learns no lower no-load latency from it, since a no-load
//! latency learnt too low would stay.
//!
//! Bounds: an answer adds at most 2^30 µs (~17 min, [`LATENCY_CAP_US`]) to a sum of 40 bits, so
//! 1024 answers of the cap, or 64 slots busy for 4.7 hours, fit in one interval; samples and
//! drops wrap after 2^32 attempts; `inflight_sum` after 2^24 / 64 = 262,144 attempts that each
//! saw all 64 slots busy (the top field: it wraps alone). An interval lasts 2 s at most unless
//! no attempt ends (or its closer is stopped). A closer stopped for hours is the one way to
//! reach them, so sums that may have wrapped (more than 2^24 / 64 samples, or an interval so
//! long that 64 slots' latencies may pass 2^40 µs) are taken out unread, as are the sums a
//! closer found dead left (they span its whole claim, not the interval after the take-over).
//! The check cannot tell 8 split attempts from none, and no more than a few are ever between
//! their two adds at once. Taking out never goes below zero (field by field), and sums that no
//! attempts add up to (more drops than samples) are not read as a window at all.

use super::policy::Window;
use super::Sample;
use crate::layout::{AdaptiveBlock, MAX_FUNNEL_LIMIT};
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::{Acquire, Relaxed};

/// One answer's latency is capped at this (µs, ~17 min) so the 40-bit sum cannot overflow.
pub(crate) const LATENCY_CAP_US: u64 = (1 << 30) - 1;
const LATENCY_BITS: u32 = 40;
const LATENCY_MASK: u64 = (1 << LATENCY_BITS) - 1;
/// The low bits of the latency sum that count its answers (mod 8).
const CHECK_MASK: u64 = 7;

/// What one attempt's end adds to `window_counts` and to `window_latency`.
pub(crate) fn added(sample: &Sample) -> (u64, u64) {
    let latency = if sample.drop {
        0
    } else {
        (sample.latency_us.min(LATENCY_CAP_US) + CHECK_MASK / 2) & !CHECK_MASK | 1
    };
    (
        1 | (sample.drop as u64) << 32,
        latency | (sample.inflight.min(MAX_FUNNEL_LIMIT) as u64) << LATENCY_BITS,
    )
}

/// The two words as a closer read them.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sums {
    counts: u64,
    latency: u64,
}

impl Sums {
    pub(crate) fn load(b: &AdaptiveBlock) -> Sums {
        Sums {
            counts: b.window_counts.load(Acquire),
            latency: b.window_latency.load(Acquire),
        }
    }

    pub(crate) fn samples(&self) -> u32 {
        self.counts as u32
    }

    /// The interval these sums make, `duration_us` long; `None` when no attempts add up to them.
    pub(crate) fn window(&self, duration_us: u64) -> Option<Window> {
        let samples = self.counts as u32;
        let drops = (self.counts >> 32) as u32;
        if drops > samples {
            return None;
        }
        // Sums that may have wrapped (an interval whose close was stuck for hours): at most
        // 64 attempts are in flight, so the latency sum stays under 64 × (duration + cap) and
        // the in-flight sum under 64 × samples. Past the fields' widths, nothing is read.
        let top = MAX_FUNNEL_LIMIT as u64;
        if u64::from(samples) * top >= 1 << (64 - LATENCY_BITS)
            || duration_us
                .saturating_add(LATENCY_CAP_US + 1)
                .saturating_mul(top)
                > LATENCY_MASK
        {
            return None;
        }
        let answers = u64::from(samples - drops);
        let sum = self.latency & LATENCY_MASK;
        Some(Window {
            samples,
            drops,
            // Less the 1 each answer added.
            latency_sum_us: sum.saturating_sub(answers),
            inflight_sum: (self.latency >> LATENCY_BITS) as u32,
            duration_us,
            torn: sum & CHECK_MASK != answers & CHECK_MASK,
        })
    }

    /// Takes what was read out of the words: what ended since stays.
    pub(crate) fn take(&self, b: &AdaptiveBlock) {
        take_fields(&b.window_counts, self.counts, 32);
        take_fields(&b.window_latency, self.latency, LATENCY_BITS);
    }
}

/// Subtracts `read` from `word`, the field below bit `split` and the one above each on its own,
/// neither below zero.
fn take_fields(word: &AtomicU64, read: u64, split: u32) {
    let low = (1u64 << split) - 1;
    let _ = word.fetch_update(Relaxed, Relaxed, |now| {
        let high = (now >> split).saturating_sub(read >> split);
        Some(high << split | (now & low).saturating_sub(read & low))
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(latency_us: u64) -> Sample {
        Sample {
            latency_us,
            drop: false,
            deadline_cut: false,
            inflight: 3,
        }
    }

    fn sums(samples: &[Sample]) -> Sums {
        samples.iter().map(added).fold(
            Sums {
                counts: 0,
                latency: 0,
            },
            |s, (c, l)| Sums {
                counts: s.counts + c,
                latency: s.latency + l,
            },
        )
    }

    #[test]
    fn an_answer_counts_in_its_latency_to_8_us() {
        let drop = Sample {
            drop: true,
            ..answer(5_000)
        };
        let w = sums(&[answer(20_000), answer(20_003), answer(20_005), drop])
            .window(0)
            .unwrap();
        assert_eq!((w.samples, w.drops, w.inflight_sum), (4, 1, 12));
        assert_eq!(w.latency_sum_us, 20_000 + 20_000 + 20_008);
        assert!(!w.torn);
        let capped = sums(&[answer(u64::MAX)]).window(0).unwrap();
        assert_eq!(capped.latency_sum_us, LATENCY_CAP_US + 1);
    }

    #[test]
    fn an_attempt_split_by_a_close_shows() {
        let whole = sums(&[answer(100_000), answer(100_000)]);
        let (count, latency) = added(&answer(100_000));
        let count_only = Sums {
            counts: whole.counts + count,
            ..whole
        };
        let latency_only = Sums {
            latency: whole.latency + latency,
            ..whole
        };
        assert!(!whole.window(0).unwrap().torn);
        assert!(count_only.window(0).unwrap().torn);
        assert!(latency_only.window(0).unwrap().torn);
    }

    #[test]
    fn sums_no_attempts_make_are_no_window_and_taking_never_wraps() {
        let wrapped = Sums {
            counts: 0xffff_ffff_ffff_fffc,
            latency: 0,
        };
        assert_eq!(wrapped.window(0), None);
        let word = AtomicU64::new(5 << 32 | 2);
        take_fields(&word, 3 << 32 | 7, 32);
        assert_eq!(
            word.load(Relaxed),
            2 << 32,
            "each field on its own, down to 0"
        );
    }
}
