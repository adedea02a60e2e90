//! The byte layout of the shared-memory segment. Everything in it is an atomic: many
//! processes read and write it at once without locks.
//!
//! ```text
//! [Header: 64 bytes][Entry 0][Entry 1]...[Entry slots-1]
//! ```
//! Change anything here and bump [`LAYOUT_VERSION`]: a file of another version is refused.

use std::sync::atomic::{AtomicU32, AtomicU64};

/// "RESILNT1" as a little-endian u64; written last when a segment is created.
pub const MAGIC: u64 = u64::from_le_bytes(*b"RESILNT1");

/// Bumped whenever [`Header`] or [`Entry`] change shape, or what processes do with them
/// (8: every process that maps the file holds a read lock on its first byte, `segment.rs`).
pub const LAYOUT_VERSION: u32 = 8;

/// The most slots a funnel can have: the in-flight set is one 64-bit mask.
pub const MAX_FUNNEL_LIMIT: u32 = 64;

/// Buckets in a retry budget's sliding window.
pub const BUDGET_BUCKETS: usize = 20;

/// Buckets in a circuit breaker's sliding window.
pub const BREAKER_BUCKETS: usize = 20;

/// Name bytes stored per entry, as 8 words.
pub const NAME_WORDS: usize = crate::validate::MAX_NAME_LEN / 8;

/// The segment header. `magic` is stored last (release) by the creator; readers check it
/// first (acquire), so a half-initialised file is never used.
#[repr(C)]
pub struct Header {
    pub magic: AtomicU64,
    pub version: AtomicU32,
    pub slots: AtomicU32,
    pub entry_size: AtomicU32,
    pub _pad: AtomicU32,
    pub total_size: AtomicU64,
    /// The creator's pid namespace (`host::pid_namespace`); 0 = unknown.
    pub pid_namespace: AtomicU64,
    /// The creator's boot (`host::boot_id`); 0 = unknown.
    pub boot: AtomicU64,
    pub _reserved: [AtomicU64; 2],
}

/// One funnel slot. `word`: `pid:22 | phase:2 | generation:40` (who owns the slot, whether
/// it is being claimed, held or cleared; the generation grows with every lease, so a word is
/// never reused), see `funnel::slot_word`; all zero is free. `expires_ms`: when the current
/// lease expires (monotonic ms), written by the word's owner before it marks the word held.
#[repr(C)]
pub struct LeaseSlot {
    pub word: AtomicU64,
    pub expires_ms: AtomicU64,
}

/// One name's circuit breaker, see [`crate::breaker`]. 192 bytes.
#[repr(C)]
pub struct BreakerBlock {
    /// `phase:2 | generation:22 | at_ms:40`: closed; open until `at_ms`; or half-open with
    /// the one probe ticket given out until `at_ms` (then given up). All zero is closed.
    pub state: AtomicU64,
    /// Each bucket: `tag:24 | calls:20 | failures:20` (as the budget's, see
    /// [`crate::breaker`]).
    pub buckets: [AtomicU64; BREAKER_BUCKETS],
    /// Failures the client would retry counted since the last success (or the last close):
    /// opens the breaker at `consecutive_failures` even while the window still holds a
    /// healthy past.
    pub streak: AtomicU64,
    pub _reserved: [AtomicU64; 2],
}

/// One named entry of the table. A name's entry holds its funnel, learned limit and metrics;
/// each retry budget and each circuit breaker has an entry of its own, keyed by the name and
/// its window (`budget.rs`, `breaker/mod.rs`), where only its block is used.
#[repr(C, align(64))]
pub struct Entry {
    /// FNV-1a hash of the name (never 0); 0 means the entry is unused. A lookup compares the
    /// name too (its first 64 bytes and its length: `table::holds`).
    pub hash: AtomicU64,
    pub name_len: AtomicU64,
    pub name: [AtomicU64; NAME_WORDS],
    /// Bit `i` set = funnel slot `i` is counted as in flight. The in-flight count is its
    /// popcount; only the owner of slot `i`'s word changes bit `i`.
    pub funnel_mask: AtomicU64,
    /// Funnels with `share`: until when (ms, the segment's clock) a background caller was
    /// recently refused, so web callers keep to the reserved slots; `fetch_max` by each such
    /// refusal, 0: never. Time-based, so a dead worker's demand lapses by itself.
    pub funnel_background_wanted_until_ms: AtomicU64,
    pub funnel_slots: [LeaseSlot; MAX_FUNNEL_LIMIT as usize],
    /// Each bucket: `tag:24 | originals:20 | retries:20`, see [`crate::budget`].
    pub budget_buckets: [AtomicU64; BUDGET_BUCKETS],
    /// The name's circuit breaker (unused unless a client of that name enables `circuit`).
    pub breaker: BreakerBlock,
    /// Host-wide counters and latency histograms of the name, see [`crate::metrics`].
    pub metrics: crate::metrics::MetricsBlock,
    /// The name's learned concurrency limit (funnel `'limit' => 'auto'`), see
    /// [`crate::adaptive_limit`]. All zero: nothing learned yet.
    pub adaptive: AdaptiveBlock,
}

/// One name's adaptive limit: the limit, the latency estimates and the current interval's
/// sums. 64 bytes. Every attempt adds to `window_counts` and `window_latency`; the process whose
/// attempt ends an interval claims the close with one CAS on `state`, takes the sums out,
/// stores the estimates and publishes the new limit (see [`crate::adaptive_limit`]).
#[repr(C)]
pub struct AdaptiveBlock {
    /// `interval_start_ms:40 | limit × 256:24`, or while a process closes the interval
    /// `1:1 | 0:7 | closer_pid:32 | limit × 256:24` (a reader of an earlier build takes it for
    /// an interval that starts in 17 years, and leaves it alone). Zero: not started (the
    /// config's `initial`).
    pub state: AtomicU64,
    /// `drops:32 | samples:32` of the current interval.
    pub window_counts: AtomicU64,
    /// `inflight_sum:24 | latency_sum_us:40` of the current interval (latency of answers
    /// that were not drops, each rounded to 8 µs plus 1, so the low 3 bits count the answers;
    /// in-flight seen when each attempt ended).
    pub window_latency: AtomicU64,
    /// `no_load_rtt_us:32 | rtt_us:32`: the slowly tracked no-load latency and the last
    /// interval's mean latency.
    pub rtt: AtomicU64,
    /// `streak:8 | intervals:56`: latency-driven cuts since the latency last came down;
    /// intervals closed so far.
    pub trend: AtomicU64,
    /// `limit × 256:32 | rtt_us:32` when that streak of cuts began.
    pub streak_start: AtomicU64,
    /// When the limit was last cut (ms, the segment's clock); 0: never. Attempts started
    /// before it are not counted: they were admitted under the higher limit.
    pub cut_ms: AtomicU64,
    /// `limit × 256`: the limit the last interval without a cut installed, when its callers
    /// left it unused; 0: they used it, or none yet (a reserved word before, always 0 there).
    pub unused_limit: AtomicU64,
}

pub const HEADER_SIZE: usize = 64;
pub const ENTRY_SIZE: usize = std::mem::size_of::<Entry>();
// The PHP tests compute file sizes from it (tests/harness/src/Run.php, segmentSize()). Version 6's
// `funnel_background_wanted_until_ms` took 8 bytes of what was padding: the size stayed.
const _: () = assert!(ENTRY_SIZE == 1984);
const _: () = assert!(std::mem::size_of::<AdaptiveBlock>() == 64);
const _: () = assert!(std::mem::size_of::<BreakerBlock>() == 192);

/// Total file size for `slots` entries.
pub fn segment_size(slots: u32) -> usize {
    HEADER_SIZE + slots as usize * ENTRY_SIZE
}

const _: () = assert!(std::mem::size_of::<Header>() == HEADER_SIZE);
const _: () = assert!(ENTRY_SIZE.is_multiple_of(64));
