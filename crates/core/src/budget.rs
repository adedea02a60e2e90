//! The retry budget: retries may be at most `floor` per window plus `ratio` × the
//! originals in the window, counted across every process of the host.
//!
//! A deposit/withdraw budget (as tower's) over a sliding window: a ring of
//! [`BUDGET_BUCKETS`] buckets, each one word `tag:24 | originals:20 | retries:20`, where
//! the tag is the bucket's epoch (`now_ms / bucket_ms`, mod 2^24). A bucket whose tag is
//! old is reset by the same CAS that counts into it, so rotation never loses a count and
//! never needs a lock. A bucket counts in the window only at the index of its tag's epoch:
//! one left 2^24 epochs ago (a budget idle for 4.7 hours at the shortest window) has a recent
//! tag again, but sits at another index (2^24 mod 20 = 16).
//!
//! Withdrawing is exact across processes. Every decision is made as of the newest epoch the
//! ring knows (the caller's clock, or a later one another process counted in: a clock read a
//! moment later, past a boundary, or a caller paused since it read its own), so all judge the
//! same window and every count lands inside it. The window spans many words, so one CAS cannot
//! check it: a withdrawal adds up the window, counts its retry (a CAS on the exact bucket word
//! it read), then adds up the window again and takes its retry back if the total is now over
//! the allowance. Of any retries counted together, the one that added up last saw them all,
//! so they never exceed it; two that race may both step back (a refusal where one could have
//! gone: the safe side).
//!
//! The window is part of a budget's identity: `('sap', 60 s)` and `('sap', 30 s)` are two
//! budgets with their own entries, so a web config and a queue config with different
//! windows (or a deploy that changes the window) never reset each other's counts.

use crate::layout::{Entry, BUDGET_BUCKETS};
use crate::{validate, Error, Segment};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

const TAG_BITS: u32 = 24;
const COUNT_BITS: u32 = 20;
const COUNT_MAX: u64 = (1 << COUNT_BITS) - 1;
const TAG_MASK: u64 = (1 << TAG_BITS) - 1;
/// How far ahead of the caller's epoch a bucket may be and still be taken as newer (another
/// process's clock, or the caller paused since it read its own). Tags wrap at 2^24 epochs, so
/// a bucket left that old would read as ahead too: the bound keeps that to a narrow band (a
/// budget idle for 2^24 buckets, about 4.7 hours at the shortest window, and used again within
/// 1024 buckets of that moment, judges a window up to 1024 buckets off for that long). Past
/// it a bucket is taken for an old one, whatever its tag says (a bound of half the tags' range
/// took the buckets of a budget idle for 2^23 of them for newer ones, and refused every retry
/// for as long again). So a caller paused longer than this, 51 windows, between its clock
/// read and its count, takes a newer bucket in its bucket's place for an old one and resets
/// it: that bucket's counts are lost, once.
const AHEAD_LIMIT: u64 = 1024;

/// A budget's settings. The fields are private and [`BudgetConfig::new`] is the only way to
/// make one, so a window shorter than its buckets (a division by zero) cannot exist.
///
/// ```compile_fail
/// // No struct literal outside the crate: a zero window cannot be written down.
/// let c = resilient_core::BudgetConfig { ratio: 0.1, floor: 5, window_ms: 0 };
/// ```
/// ```
/// # use std::time::Duration;
/// use resilient_core::BudgetConfig;
/// assert!(BudgetConfig::new(0.1, 5, Duration::ZERO).is_err());
/// assert!(BudgetConfig::new(0.1, 5, Duration::from_millis(19)).is_err(), "under 1 ms a bucket");
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetConfig {
    ratio: f64,
    floor: u32,
    window_ms: u64,
}

impl BudgetConfig {
    /// The largest ratio: a thousand retries per original is a typo, not a budget.
    pub const MAX_RATIO: f64 = 1000.0;
    /// The largest floor (a bucket counts up to 2^20 - 1).
    pub const MAX_FLOOR: u32 = COUNT_MAX as u32;
    /// The longest window: ten minutes, so a bucket (30 s) fills only past 34,952 originals a
    /// second on one host (each bucket counts up to 2^20 - 1 originals and as many retries).
    /// Past that, originals stop being counted, so fewer retries are allowed: the safe side.
    pub const MAX_WINDOW: Duration = Duration::from_secs(600);

    /// `ratio`: retries allowed per original, finite, `0..=1000`; `floor`: retries always
    /// allowed per window, at most [`Self::MAX_FLOOR`]; `window`: at least 20 ms (one per
    /// bucket), at most [`Self::MAX_WINDOW`], counted in whole milliseconds (a fraction of one
    /// is dropped; [`Self::window`] says what is used).
    pub fn new(ratio: f64, floor: u32, window: Duration) -> Result<Self, Error> {
        let ratio = validate::ratio("ratio", ratio)?;
        if ratio > Self::MAX_RATIO {
            return Err(Error::invalid_argument(
                "ratio",
                format!(
                    "must be at most {}, got {}",
                    Self::MAX_RATIO,
                    crate::validate::shown(ratio)
                ),
            ));
        }
        if floor > Self::MAX_FLOOR {
            return Err(Error::invalid_argument(
                "floor",
                format!("must be between 0 and {}, got {floor}", Self::MAX_FLOOR),
            ));
        }
        if window > Self::MAX_WINDOW {
            return Err(Self::window_too_long(window.as_secs_f64()));
        }
        let window = validate::positive_duration("window", window)?;
        let window_ms = window.as_millis() as u64;
        if window_ms < BUDGET_BUCKETS as u64 {
            return Err(Error::invalid_argument(
                "window",
                format!("must be at least {BUDGET_BUCKETS} ms, got {window:?}"),
            ));
        }
        Ok(BudgetConfig {
            ratio,
            floor,
            window_ms,
        })
    }

    /// [`Self::new`] with the window in seconds (as PHP gives it): a window over
    /// [`Self::MAX_WINDOW`] is refused in its words, however long (not in a year's, the
    /// longest duration there is).
    pub fn from_seconds(ratio: f64, floor: u32, window_seconds: f64) -> Result<Self, Error> {
        if window_seconds.is_finite() && window_seconds > Self::MAX_WINDOW.as_secs_f64() {
            return Err(Self::window_too_long(window_seconds));
        }
        Self::new(ratio, floor, validate::duration("window", window_seconds)?)
    }

    fn window_too_long(seconds: f64) -> Error {
        Error::invalid_argument(
            "window",
            format!(
                "must be at most {} seconds, got {}",
                Self::MAX_WINDOW.as_secs(),
                validate::shown(seconds)
            ),
        )
    }

    pub fn ratio(&self) -> f64 {
        self.ratio
    }

    pub fn floor(&self) -> u32 {
        self.floor
    }

    pub fn window(&self) -> Duration {
        Duration::from_millis(self.window_ms)
    }

    /// The width of one of the window's buckets, ms: rounded up, so the buckets cover the
    /// whole window (a window of 39 ms remembers 40, never 20).
    pub fn bucket_ms(&self) -> u64 {
        self.window_ms.div_ceil(BUDGET_BUCKETS as u64)
    }

    /// What tells this budget's counters apart from other windows' of the same name:
    /// `budget/60000ms`. A window that is not a whole number of buckets also names its bucket
    /// width (`budget/39ms/2ms`): releases that rounded it down kept such a ring under the
    /// plain key, and its tags, counted in other buckets, must not be read as this one's.
    pub fn key(&self) -> String {
        let buckets = BUDGET_BUCKETS as u64;
        match self.window_ms % buckets {
            0 => format!("budget/{}ms", self.window_ms),
            _ => format!("budget/{}ms/{}ms", self.window_ms, self.bucket_ms()),
        }
    }
}

/// What the window holds now.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BudgetStats {
    pub originals: u64,
    pub retries: u64,
    /// `floor + ratio × originals`.
    pub allowed: f64,
    /// `allowed - retries`, never negative, and never more than the newest bucket can still
    /// count (a bucket counts up to 2^20 - 1 retries). Fractional with a ratio:
    /// [`RetryBudget::try_consume`] grants while at least 1 remains (2 of 2.5).
    pub remaining: f64,
}

/// A named retry budget bound to a segment.
#[derive(Clone)]
pub struct RetryBudget {
    seg: Arc<Segment>,
    entry: usize,
    config: BudgetConfig,
}

impl RetryBudget {
    pub fn new(seg: Arc<Segment>, name: &str, config: BudgetConfig) -> Result<Self, Error> {
        validate::name("name", name)?;
        // The separator is a control character, which no validated name contains.
        let entry = seg.entry_index_unchecked(&format!("{name}\u{1f}{}", config.key()))?;
        // The window is in the key, so the bucket width is the config's, never stored.
        Ok(RetryBudget { seg, entry, config })
    }

    pub fn config(&self) -> BudgetConfig {
        self.config
    }

    /// Deposit: one original request (a task a user asked for, whatever its attempts).
    pub fn record_original(&self, now_ms: u64) {
        let e = self.entry();
        let epoch = Window::read(e, self.epoch(now_ms)).newest;
        let tag = epoch & TAG_MASK;
        let bucket = &e.budget_buckets[index(epoch)];
        let _ = bucket.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
            let (tag, o, r) = if tag_of(w) == tag || newer(w, tag) {
                // A newer bucket in its place (this caller was paused past the ring's look
                // ahead): added to, never reset.
                (tag_of(w), originals_of(w), retries_of(w))
            } else {
                (tag, 0, 0)
            };
            Some(pack(tag, (o + 1).min(COUNT_MAX), r))
        });
    }

    /// Withdraw: may one retry be sent now? Counts it when yes.
    pub fn try_consume(&self, now_ms: u64) -> bool {
        self.try_consume_pausing(now_ms, || {})
    }

    /// [`Self::try_consume`], running `between` after the first sum of the window and before
    /// the count (tests replay another process's withdrawal there).
    pub(crate) fn try_consume_pausing(&self, now_ms: u64, between: impl FnOnce()) -> bool {
        let mut between = Some(between);
        let e = self.entry();
        loop {
            let window = Window::read(e, self.epoch(now_ms));
            let (originals, retries) = window.sum();
            // The epsilon keeps 5 + 0.1 × 100 from landing a hair under 15.
            if (retries + 1) as f64 > self.allowed(originals) + 1e-9 {
                return false;
            }
            let tag = window.newest & TAG_MASK;
            let idx = index(window.newest);
            let w = window.words[idx];
            if newer(w, tag) {
                // This caller was paused past the ring's look ahead, and a newer bucket took
                // its bucket's place: refused rather than reset it.
                return false;
            }
            let (o, r) = if tag_of(w) == tag {
                (originals_of(w), retries_of(w))
            } else {
                (0, 0)
            };
            if r >= COUNT_MAX {
                return false;
            }
            if let Some(between) = between.take() {
                between();
            }
            let bucket = &e.budget_buckets[idx];
            if bucket
                .compare_exchange(w, pack(tag, o, r + 1), Ordering::SeqCst, Ordering::SeqCst)
                .is_err()
            {
                continue;
            }
            // Counted: now check the window with every retry counted before this point.
            let (all_o, all_r) = Window::read(e, window.newest).sum();
            if all_r as f64 <= self.allowed(all_o) + 1e-9 {
                return true;
            }
            let _ = bucket.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                (tag_of(w) == tag && retries_of(w) > 0).then(|| w - 1)
            });
            return false;
        }
    }

    /// Gives back a retry [`Self::try_consume`] counted at `consumed_at_ms` that was never sent
    /// (a guard refused it after its backoff): the budget is a share of what the upstream got.
    /// It comes off the bucket it was counted in (the caller's epoch, or the next one, when
    /// another process had already counted into it); a bucket that has left the window since
    /// took the retry with it, and nothing newer is taken off in its place.
    pub fn give_back(&self, consumed_at_ms: u64) {
        let e = self.entry();
        let epoch = self.epoch(consumed_at_ms);
        for epoch in [epoch, epoch + 1] {
            let tag = epoch & TAG_MASK;
            let bucket = &e.budget_buckets[index(epoch)];
            let taken = bucket.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| {
                (tag_of(w) == tag && retries_of(w) > 0).then(|| w - 1)
            });
            // Counted here, or this bucket has moved on to a later epoch: the window has left
            // the retry's, and the next bucket may hold only newer ones.
            if taken.is_ok() || newer(bucket.load(Ordering::SeqCst), tag) {
                return;
            }
        }
    }

    pub fn stats(&self, now_ms: u64) -> BudgetStats {
        let window = Window::read(self.entry(), self.epoch(now_ms));
        let (originals, retries) = window.sum();
        let allowed = self.allowed(originals);
        BudgetStats {
            originals,
            retries,
            allowed,
            remaining: (allowed - retries as f64)
                .min(window.room() as f64)
                .max(0.0),
        }
    }

    fn allowed(&self, originals: u64) -> f64 {
        self.config.floor as f64 + self.config.ratio * originals as f64
    }

    fn entry(&self) -> &Entry {
        self.seg.entry(self.entry)
    }

    fn epoch(&self, now_ms: u64) -> u64 {
        now_ms / self.config.bucket_ms()
    }
}

/// The ring as one read saw it, and the newest epoch it knows of: the caller's own, or a
/// later one another process counted in (its clock read later, or this caller was paused
/// since reading its own). Decisions and counts are made as of that newest epoch, so every
/// process judges the same window and no count lands in a bucket the window already left.
struct Window {
    words: [u64; BUDGET_BUCKETS],
    newest: u64,
}

impl Window {
    fn read(e: &Entry, epoch: u64) -> Self {
        let words: [u64; BUDGET_BUCKETS] =
            std::array::from_fn(|i| e.budget_buckets[i].load(Ordering::SeqCst));
        let cur = epoch & TAG_MASK;
        let ahead = words
            .iter()
            .filter(|&&w| w != 0)
            .map(|&w| tag_of(w).wrapping_sub(cur) & TAG_MASK)
            .filter(|&d| d <= AHEAD_LIMIT)
            .max()
            .unwrap_or(0);
        Window {
            words,
            newest: epoch + ahead,
        }
    }

    /// Retries the newest bucket can still count.
    fn room(&self) -> u64 {
        let w = self.words[index(self.newest)];
        if tag_of(w) == self.newest & TAG_MASK {
            COUNT_MAX - retries_of(w)
        } else {
            COUNT_MAX
        }
    }

    /// Originals and retries of the buckets inside the window: the last [`BUDGET_BUCKETS`]
    /// epochs up to the newest.
    fn sum(&self) -> (u64, u64) {
        let cur = self.newest & TAG_MASK;
        self.words
            .iter()
            .enumerate()
            .filter(|&(i, &w)| {
                let age = cur.wrapping_sub(tag_of(w)) & TAG_MASK;
                // At the index of its epoch: a tag that wrapped sits elsewhere (2^24 mod 20 = 16).
                w != 0
                    && age < BUDGET_BUCKETS as u64
                    && age <= self.newest
                    && index(self.newest - age) == i
            })
            .map(|(_, w)| w)
            .fold((0, 0), |(o, r), &w| {
                (o + originals_of(w), r + retries_of(w))
            })
    }
}

/// Bucket word `w` counts a later epoch than `tag` (at most [`AHEAD_LIMIT`] later); an empty
/// word counts none.
fn newer(w: u64, tag: u64) -> bool {
    let ahead = tag_of(w).wrapping_sub(tag) & TAG_MASK;
    w != 0 && ahead != 0 && ahead <= AHEAD_LIMIT
}

fn index(epoch: u64) -> usize {
    (epoch % BUDGET_BUCKETS as u64) as usize
}

fn pack(tag: u64, originals: u64, retries: u64) -> u64 {
    tag << (2 * COUNT_BITS) | originals << COUNT_BITS | retries
}
fn tag_of(w: u64) -> u64 {
    w >> (2 * COUNT_BITS)
}
fn originals_of(w: u64) -> u64 {
    (w >> COUNT_BITS) & COUNT_MAX
}
fn retries_of(w: u64) -> u64 {
    w & COUNT_MAX
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(ratio: f64, floor: u32, window_seconds: f64) -> BudgetConfig {
        BudgetConfig::new(ratio, floor, Duration::from_secs_f64(window_seconds)).unwrap()
    }

    fn budget(tag: &str, ratio: f64, floor: u32, window: f64) -> (RetryBudget, std::path::PathBuf) {
        let p =
            std::env::temp_dir().join(format!("resilient-budget-{tag}-{}.shm", std::process::id()));
        let _ = std::fs::remove_file(&p);
        let seg = Arc::new(Segment::open(&p, 8).unwrap());
        (
            RetryBudget::new(seg, "sap", config(ratio, floor, window)).unwrap(),
            p,
        )
    }

    /// A retry counted and never sent (a guard refused it after its backoff) is given back: the
    /// allowance it took is there again. One whose bucket has left the window is gone already:
    /// a newer retry is not taken off in its place.
    #[test]
    fn a_retry_never_sent_is_given_back() {
        let (b, p) = budget("give-back", 0.0, 1, 1.0);
        let t = 1_000_000;
        assert!(b.try_consume(t));
        assert!(!b.try_consume(t + 10), "the floor of 1 is spent");
        b.give_back(t);
        assert_eq!(b.stats(t + 10).retries, 0);
        assert!(b.try_consume(t + 20), "given back: allowed again");
        let later = t + 5_000;
        assert!(b.try_consume(later), "the window slid");
        b.give_back(t + 20);
        assert_eq!(
            b.stats(later).retries,
            1,
            "an old retry's give-back takes nothing now"
        );
        std::fs::remove_file(p).unwrap();
    }

    /// A window that is not a whole number of buckets is covered whole (the buckets are rounded
    /// up): 39 ms made 1 ms buckets, so a retry was forgotten after 20 ms.
    #[test]
    fn a_window_of_odd_milliseconds_is_remembered_whole() {
        let (b, p) = budget("odd", 0.0, 1, 0.039);
        let t = 1_000_000;
        assert!(b.try_consume(t));
        for later in [20, 26, 38] {
            assert_eq!(
                b.stats(t + later).retries,
                1,
                "{later} ms later, inside the 39 ms window"
            );
            assert!(
                !b.try_consume(t + later),
                "{later} ms later: the floor of 1 is spent"
            );
        }
        assert!(b.try_consume(t + 45), "the window slid past it");
        std::fs::remove_file(p).unwrap();
    }

    /// An odd window's ring has a key of its own: a ring that releases rounding the buckets
    /// down left under the plain key holds tags of another width.
    #[test]
    fn an_odd_window_names_its_bucket_width() {
        assert_eq!(config(0.1, 5, 60.0).key(), "budget/60000ms");
        assert_eq!(config(0.1, 5, 0.039).key(), "budget/39ms/2ms");
        assert_eq!(config(0.1, 5, 0.25).key(), "budget/250ms/13ms");
    }

    #[test]
    fn floor_plus_ratio_of_originals() {
        let (b, p) = budget("ratio", 0.1, 5, 60.0);
        let t = 1_000_000;
        for _ in 0..100 {
            b.record_original(t);
        }
        let granted = (0..100).filter(|_| b.try_consume(t)).count();
        assert_eq!(granted, 15);
        let s = b.stats(t);
        assert_eq!((s.originals, s.retries), (100, 15));
        assert!(s.remaining < 1e-6);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn the_window_slides() {
        let (b, p) = budget("slide", 0.1, 2, 2.0); // 100 ms buckets
        let t0 = 5_000_000;
        for _ in 0..30 {
            b.record_original(t0);
        }
        assert_eq!((0..10).filter(|_| b.try_consume(t0)).count(), 5);
        // Half a window later everything is still inside.
        assert!(!b.try_consume(t0 + 1000));
        // A full window later the old bucket has left: only the floor again.
        let t1 = t0 + 2000;
        assert_eq!(b.stats(t1).originals, 0);
        assert_eq!((0..10).filter(|_| b.try_consume(t1)).count(), 2);
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn zero_floor_and_zero_ratio_deny_everything() {
        let (b, p) = budget("zero", 0.0, 0, 1.0);
        b.record_original(0);
        assert!(!b.try_consume(0));
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn concurrent_withdrawals_do_not_overspend() {
        let (b, p) = budget("race", 0.1, 5, 60.0);
        let t = 42_000;
        for _ in 0..100 {
            b.record_original(t);
        }
        let granted = std::sync::atomic::AtomicU32::new(0);
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| {
                    for _ in 0..50 {
                        if b.try_consume(t) {
                            granted.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(granted.load(Ordering::SeqCst), 15);
        std::fs::remove_file(p).unwrap();
    }

    /// Two processes whose clocks read either side of a bucket boundary (1 s window, 50 ms
    /// buckets; floor 1): the one still in the older bucket must see the retry counted in the
    /// newer one, which is inside its window too.
    #[test]
    fn a_retry_counted_in_the_next_bucket_is_seen_from_the_one_before() {
        let (b, p) = budget("ahead", 0.0, 1, 1.0);
        assert!(b.try_consume(1000), "counted in bucket 20");
        assert!(!b.try_consume(999), "bucket 19's caller sees it");
        assert_eq!(b.stats(999).retries, 1);
        std::fs::remove_file(p).unwrap();
    }

    /// The other hole: a process pauses between adding up the window and counting its retry,
    /// and another counts one into a different bucket meanwhile. Both used to succeed.
    #[test]
    fn a_retry_counted_elsewhere_between_the_sum_and_the_count_is_seen() {
        let (b, p) = budget("between", 0.0, 1, 1.0);
        let granted = b.try_consume_pausing(999, || assert!(b.try_consume(1000)));
        assert!(!granted, "the window holds one retry");
        assert_eq!(
            b.stats(1000).retries,
            1,
            "the refused one is not left counted"
        );
        let (b, p2) = budget("between-other-way", 0.0, 1, 1.0);
        let granted = b.try_consume_pausing(1000, || assert!(b.try_consume(999)));
        assert!(!granted);
        assert_eq!(b.stats(1000).retries, 1);
        std::fs::remove_file(p).unwrap();
        std::fs::remove_file(p2).unwrap();
    }

    /// 16 threads spending one budget (floor 2, 200 ms window) while their clocks straddle
    /// bucket boundaries (each reads the shared clock, then a few ms earlier or later), for 60
    /// windows. An independent observer: each grant happened as of a time between the clock
    /// the caller was given and the shared clock just after it returned (plus the spread), so
    /// any grants whose spans fit in 18 buckets shared one window: never more than the floor.
    #[test]
    fn concurrent_withdrawals_across_bucket_boundaries_do_not_overspend() {
        use std::sync::atomic::AtomicU64;
        let (b, p) = budget("boundaries", 0.0, 2, 0.2);
        let clock = AtomicU64::new(10_000);
        let grants = std::sync::Mutex::new(Vec::new());
        const SKEW: u64 = 4;
        std::thread::scope(|s| {
            for t in 0..16u64 {
                let (b, clock, grants) = (&b, &clock, &grants);
                s.spawn(move || {
                    let mut n = t;
                    while clock.load(Ordering::SeqCst) < 10_000 + 60 * 200 {
                        n = n
                            .wrapping_mul(6364136223846793005)
                            .wrapping_add(1442695040888963407);
                        let now = clock.load(Ordering::SeqCst) + (n >> 60) % (2 * SKEW + 1) - SKEW;
                        if b.try_consume(now) {
                            let after = clock.load(Ordering::SeqCst) + SKEW;
                            grants.lock().unwrap().push((now, after));
                        }
                        if t == 0 {
                            clock.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        let mut at = grants.into_inner().unwrap();
        at.sort_unstable();
        // Buckets of 10 ms: grants whose spans all lie within 180 ms are within 18 buckets.
        let span = 180;
        for &(from, _) in &at {
            let inside: Vec<_> = at
                .iter()
                .filter(|&&(lo, hi)| lo >= from && hi < from + span)
                .collect();
            assert!(
                inside.len() <= 2,
                "{} grants within {span} ms of {from}: {inside:?}",
                inside.len()
            );
        }
        assert!(at.len() >= 50, "the budget was spent: {} grants", at.len());
        std::fs::remove_file(p).unwrap();
    }

    /// A bucket left 2^24 epochs ago (its tag wrapped) is not taken for one far ahead.
    #[test]
    fn a_bucket_left_since_long_ago_is_not_taken_for_a_newer_one() {
        let (b, p) = budget("wrapped", 0.0, 1, 1.0);
        assert!(b.try_consume(1000), "bucket 20");
        // 2^24 - 5000 buckets later, that tag reads as 5020 ahead, past the bound.
        let later = 1000 + ((1u64 << 24) - 5000) * 50;
        assert!(b.try_consume(later), "a window of its own");
        assert!(!b.try_consume(later), "floor 1");
        std::fs::remove_file(p).unwrap();
    }

    /// A budget idle for 2^23 of its buckets or more (4.9 days at a 1 s window, 2.3 hours at
    /// the shortest) and used again: its buckets were taken for newer ones (up to half the
    /// tags' range ahead), so every retry was refused, its originals piled into those buckets
    /// unseen, and when the tags came round again they were summed at once: 0 of 72,000
    /// retries in an hour at a 1 s window, then 336,701 granted in one bucket of a 20 ms
    /// window whose allowance was 15.
    #[test]
    fn a_budget_idle_for_half_the_tags_range_starts_a_window_of_its_own() {
        for idle in [(1u64 << 23) + (1 << 20), (1 << 24) - 2048] {
            let (b, p) = budget("idle", 0.1, 5, 1.0);
            let mut t = 1_000_000_000;
            // Every bucket of the ring written.
            while t < 1_000_002_000 {
                b.record_original(t);
                t += 10;
            }
            let resume = t + idle * 50;
            for _ in 0..100 {
                b.record_original(resume);
            }
            assert_eq!(
                b.stats(resume).originals,
                100,
                "idle {idle}: the originals counted"
            );
            let granted = (0..30).filter(|_| b.try_consume(resume)).count();
            assert_eq!(granted, 15, "idle {idle}: 5 + 0.1 × 100");
            std::fs::remove_file(p).unwrap();
        }
    }

    /// A caller paused since its clock read, less than the ring looks ahead (1000 buckets),
    /// finds a newer bucket at its bucket's place: it counts in the newest bucket and judges
    /// the newest window, never resets it (which erased the retries counted there).
    #[test]
    fn a_caller_behind_never_resets_a_newer_bucket() {
        let (b, p) = budget("behind", 0.0, 1, 1.0);
        let now = 1_000_000;
        assert!(b.try_consume(now));
        let stale = now - 1000 * 50; // the same place in the ring
        b.record_original(stale);
        assert!(
            !b.try_consume(stale),
            "judged as of the newest bucket, whose retry spent the floor"
        );
        assert!(
            !b.try_consume(now),
            "the retry counted at `now` still counts"
        );
        assert_eq!(b.stats(now).originals, 1, "the original was counted");
        std::fs::remove_file(p).unwrap();
    }

    /// Past the look-ahead (1200 buckets, 60 windows) a newer bucket cannot be told from one
    /// left 2^24 buckets ago, which must be reset (the test above): such a caller resets it,
    /// and its counts are lost, once.
    #[test]
    fn a_caller_behind_past_the_look_ahead_takes_a_newer_bucket_for_an_old_one() {
        let (b, p) = budget("far-behind", 0.0, 1, 1.0);
        let now = 1_000_000;
        assert!(b.try_consume(now));
        b.record_original(now - 1200 * 50);
        assert_eq!(
            b.stats(now).retries,
            0,
            "the retry counted at `now` is lost"
        );
        std::fs::remove_file(p).unwrap();
    }

    #[test]
    fn budgets_with_different_windows_do_not_reset_each_other() {
        let (a, p) = budget("windows", 0.1, 0, 60.0);
        let seg = a.seg.clone();
        for _ in 0..50 {
            a.record_original(1000);
        }
        let b = RetryBudget::new(seg.clone(), "sap", config(0.1, 0, 30.0)).unwrap();
        b.record_original(1000);
        let a_again = RetryBudget::new(seg, "sap", config(0.1, 0, 60.0)).unwrap();
        assert_eq!(a_again.stats(1000).originals, 50);
        assert_eq!(b.stats(1000).originals, 1);
        std::fs::remove_file(p).unwrap();
    }

    /// A bucket counts at most 2^20 - 1 retries. When the newest one is full, `try_consume`
    /// refuses even though the window allows more; `remaining` must say the same (it said 10).
    /// The next bucket takes the rest.
    #[test]
    fn remaining_agrees_with_try_consume_when_a_bucket_is_full() {
        let (b, p) = budget("full-bucket", 1.0, BudgetConfig::MAX_FLOOR, 60.0);
        let t = 9_000_000;
        for _ in 0..10 {
            b.record_original(t);
        }
        let mut granted = 0u64;
        while b.try_consume(t) {
            granted += 1;
        }
        assert_eq!(granted, COUNT_MAX, "the bucket filled first");
        assert_eq!(
            b.stats(t).remaining,
            0.0,
            "try_consume refuses: nothing remains"
        );
        let next = t + b.config().bucket_ms();
        assert_eq!(
            b.stats(next).remaining,
            10.0,
            "a fresh bucket takes the rest"
        );
        assert_eq!((0..20).filter(|_| b.try_consume(next)).count(), 10);
        std::fs::remove_file(p).unwrap();
    }

    /// The longest window is 10 minutes: a bucket of 30 s counts up to 2^20 - 1 originals,
    /// 34,952 a second on one host. A day's window filled its 72-minute buckets at 243 a second
    /// and then stopped counting without a word.
    #[test]
    fn a_window_whose_buckets_could_fill_is_refused() {
        let max = BudgetConfig::MAX_WINDOW;
        assert_eq!(max, Duration::from_secs(600));
        let ok = BudgetConfig::new(0.1, 5, max).unwrap();
        assert!(
            COUNT_MAX * 1000 / ok.bucket_ms() >= 34_952,
            "the rate a bucket holds"
        );
        let err = BudgetConfig::new(0.1, 5, max + Duration::from_millis(1)).unwrap_err();
        assert_eq!(err.argument(), Some("window"));
        assert!(err.to_string().contains("at most 600"), "{err}");
        let day = BudgetConfig::new(0.1, 5, Duration::from_secs(86_400));
        assert_eq!(day.unwrap_err().argument(), Some("window"));
        // Past a year too, in the window's words, not a year's.
        for seconds in [1e300, 4e7] {
            let err = BudgetConfig::from_seconds(0.1, 5, seconds).unwrap_err();
            assert!(err.to_string().contains("at most 600 seconds"), "{err}");
        }
    }

    /// A window counts in whole milliseconds: a fraction of one is dropped, and `window()`
    /// says what is used.
    #[test]
    fn a_window_counts_in_whole_milliseconds() {
        assert_eq!(config(0.1, 5, 0.0299).window(), Duration::from_millis(29));
        assert_eq!(config(0.1, 5, 0.3).window(), Duration::from_millis(300));
    }

    #[test]
    fn validation() {
        let arg = |r: Result<BudgetConfig, Error>| r.unwrap_err().argument().map(str::to_owned);
        let minute = Duration::from_secs(60);
        assert_eq!(
            arg(BudgetConfig::new(-0.1, 5, minute)).as_deref(),
            Some("ratio")
        );
        assert_eq!(
            arg(BudgetConfig::new(f64::NAN, 5, minute)).as_deref(),
            Some("ratio")
        );
        assert_eq!(
            arg(BudgetConfig::new(1000.5, 5, minute)).as_deref(),
            Some("ratio")
        );
        assert_eq!(
            arg(BudgetConfig::new(0.1, 1 << 20, minute)).as_deref(),
            Some("floor")
        );
        assert_eq!(
            arg(BudgetConfig::new(0.1, 5, Duration::ZERO)).as_deref(),
            Some("window")
        );
        assert_eq!(
            arg(BudgetConfig::new(0.1, 5, Duration::from_millis(19))).as_deref(),
            Some("window"),
            "shorter than one millisecond per bucket"
        );
        let ok = BudgetConfig::new(0.1, 5, Duration::from_millis(20)).unwrap();
        assert_eq!(ok.bucket_ms(), 1);
    }

    /// The budget's bucket tags wrap as the breaker's: 1000 originals in one bucket, the
    /// budget idle for exactly 2^24 buckets (9.7 days at a 1 s window, 4.7 hours at 20 ms), and
    /// that bucket's tag is the current epoch's again. It sits at another index, so it is not
    /// summed; before, its originals were, and 105 retries were granted where the floor allows 5.
    #[test]
    fn a_bucket_2_pow_24_epochs_old_is_not_summed_again() {
        let (b, p) = budget("tagwrap", 0.1, 5, 1.0);
        let t0 = 1_000_000;
        for _ in 0..1_000 {
            b.record_original(t0);
        }
        let t1 = t0 + (1u64 << 24) * b.config().bucket_ms();
        let seen = b.stats(t1).originals;
        let granted = (0..200).filter(|_| b.try_consume(t1)).count();
        std::fs::remove_file(p).unwrap();
        assert!(
            seen == 0 && granted == 5,
            "after {} days idle: {seen} originals in the window, {granted} retries granted \
             (floor 5, no originals since)",
            (t1 - t0) / 86_400_000
        );
    }
}
