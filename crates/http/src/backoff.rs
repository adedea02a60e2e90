//! Full-jitter exponential backoff as a pure iterator of durations.
//!
//! Retry `n` (1 for the first retry) waits a uniform random time in
//! `[0, min(cap, base · 2^(n-1))]` ("full jitter", seed 000: 25 ms base, 200 ms cap). Spreading
//! the waits over the whole range is what keeps clients that failed together from coming back
//! together. The iterator never ends: the attempt loop, not the backoff, decides when to stop.
//! The random source is a seedable `SmallRng`, so tests can replay a sequence exactly.

use std::time::Duration;

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Full-jitter backoff: an endless iterator of waits, one per retry.
#[derive(Debug, Clone)]
pub struct FullJitter {
    base: Duration,
    cap: Duration,
    retry: u32,
    rng: SmallRng,
}

impl FullJitter {
    /// A backoff whose random sequence is fixed by `seed` (tests, reproducible runs).
    pub fn seeded(base: Duration, cap: Duration, seed: u64) -> Self {
        Self {
            base,
            cap,
            retry: 0,
            rng: SmallRng::seed_from_u64(seed),
        }
    }

    /// A backoff with a fresh seed: a per-process secret from the OS (drawn once), mixed with
    /// the monotonic clock and a counter, so calls, processes and a parent and its forked child
    /// (different call times) never share a sequence, without a syscall per call.
    pub fn from_entropy(base: Duration, cap: Duration) -> Self {
        use std::sync::atomic::{AtomicU64, Ordering};
        static SECRET: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let secret = *SECRET.get_or_init(|| {
            rand::rngs::OsRng
                .try_next_u64_compat()
                .unwrap_or_else(|| crate::clock::monotonic_ns() ^ (std::process::id() as u64) << 32)
        });
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let seed = splitmix64(
            secret
                ^ crate::clock::monotonic_ns().rotate_left(17)
                ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        );
        Self::seeded(base, cap, seed)
    }

    /// The upper bound of the wait before retry `n` (1-based): `min(cap, base · 2^(n-1))`,
    /// saturating instead of overflowing for large `n`.
    pub fn ceiling(base: Duration, cap: Duration, n: u32) -> Duration {
        let exp = n.saturating_sub(1).min(63);
        let factor = 1u128 << exp;
        let nanos = base.as_nanos().saturating_mul(factor).min(cap.as_nanos());
        Duration::from_nanos(nanos.min(u64::MAX as u128) as u64)
    }
}

impl Iterator for FullJitter {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        self.retry = self.retry.saturating_add(1);
        let ceiling = Self::ceiling(self.base, self.cap, self.retry).as_nanos() as u64;
        Some(Duration::from_nanos(self.rng.random_range(0..=ceiling)))
    }
}

/// SplitMix64 finaliser: spreads nearby inputs (clock ticks) over the whole seed space.
pub(crate) fn splitmix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `OsRng` in rand 0.9 is fallible through `TryRngCore`; this keeps the call site short.
trait TryNextU64 {
    fn try_next_u64_compat(&mut self) -> Option<u64>;
}

impl TryNextU64 for rand::rngs::OsRng {
    fn try_next_u64_compat(&mut self) -> Option<u64> {
        use rand::TryRngCore;
        self.try_next_u64().ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn ceilings_double_from_base_up_to_cap() {
        let c = |n| FullJitter::ceiling(25 * MS, 200 * MS, n);
        assert_eq!(
            [c(1), c(2), c(3), c(4), c(5), c(40)],
            [25 * MS, 50 * MS, 100 * MS, 200 * MS, 200 * MS, 200 * MS]
        );
        assert_eq!(
            FullJitter::ceiling(Duration::MAX, Duration::MAX, u32::MAX),
            Duration::from_nanos(u64::MAX)
        );
    }

    #[test]
    fn waits_stay_within_their_bound_and_vary() {
        let waits: Vec<Duration> = FullJitter::seeded(25 * MS, 200 * MS, 7).take(200).collect();
        for (i, w) in waits.iter().enumerate() {
            assert!(
                *w <= FullJitter::ceiling(25 * MS, 200 * MS, i as u32 + 1),
                "retry {} waited {w:?}",
                i + 1
            );
        }
        let distinct: std::collections::HashSet<_> = waits.iter().collect();
        assert!(
            distinct.len() > 150,
            "full jitter must spread the waits, got {} distinct",
            distinct.len()
        );
        // Full jitter uses the whole range: some waits in the lower and some in the upper half.
        let late = &waits[10..];
        assert!(late.iter().any(|w| *w < 100 * MS) && late.iter().any(|w| *w > 100 * MS));
    }

    #[test]
    fn the_same_seed_replays_the_same_sequence() {
        let a: Vec<_> = FullJitter::seeded(MS, 100 * MS, 42).take(10).collect();
        let b: Vec<_> = FullJitter::seeded(MS, 100 * MS, 42).take(10).collect();
        let c: Vec<_> = FullJitter::seeded(MS, 100 * MS, 43).take(10).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn a_zero_base_never_waits() {
        assert!(FullJitter::seeded(Duration::ZERO, 200 * MS, 1)
            .take(10)
            .all(|w| w.is_zero()));
    }
}
