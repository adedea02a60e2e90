//! The per-process handle on the shared-memory segment, and the degraded mode.
//!
//! Opened lazily on first use (a Funnel, RetryBudget or Client with guards),
//! never in MINIT: the FPM master runs MINIT as root before forking, and the
//! file must be created by the user that runs PHP (the core refuses a file
//! owned by another uid). The default path `/dev/shm/resilient-<uid>.v<layout version>.shm` is
//! computed here with `getuid()` for the same reason (why this default, and
//! how to choose a safer one: docs/shared-memory.md).
//!
//! Degraded mode: when the segment cannot be used (owned by another user,
//! readable by others, corrupt, of another layout version, the file system is
//! full...) this process uses a process-local segment of the same layout
//! instead, so Funnel, RetryBudget and Client keep working with limits that
//! count this process only. It is said once per process in PHP's error log
//! (not an E_WARNING: frameworks turn those into exceptions) and visible from
//! PHP (`Funnel::degradedReason()`, `isDegraded()`). With
//! `resilient.shm_required=1` the error is thrown instead
//! (`Resilient\SharedMemoryError`). A bad ini value is always thrown.
//!
//! The cache is keyed by pid, path, slot count and `shm_required`: a child of
//! `pcntl_fork` opens its own handle instead of using the parent's, and a
//! test that points `resilient.shm_path` elsewhere with `ini_set()` gets the
//! other file (the objects it already holds too, at their next use). A cached
//! shared segment whose file shrank, was removed or was replaced is reopened (a
//! mapping of a shrunk file would fault); a degraded
//! process tries the file again, without waiting for a lock, and leaves the
//! degraded mode when it has become usable (a long-running queue worker is not
//! restarted when the file is fixed). Either check runs at the first use of each
//! request, and within one (or in a CLI process) at most every `REVALIDATE_MS`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use ext_php_rs::exception::PhpException;
use resilient_core::Segment;

use crate::exceptions::{self, Kind};
use crate::{errors, ini};

struct Cached {
    pid: u32,
    path: PathBuf,
    slots: u32,
    required: bool,
    segment: Arc<Segment>,
    /// Why the segment is process-local; `None` when shared.
    degraded: Option<String>,
    /// When the file was last found still valid (monotonic ms).
    checked_ms: u64,
    /// Check the file at the next use whatever `checked_ms` says (a new request began).
    recheck: bool,
}

/// How often a cached segment's file is checked (shrunk, removed, replaced).
const REVALIDATE_MS: u64 = 1000;

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// With `shm_required=1`, the last failure to open the segment (there is no fallback to cache):
/// for `REVALIDATE_MS` each use throws it again at once, and after that the file is tried
/// without waiting for anyone's lock. Otherwise a file whose initialiser hangs made every use
/// wait the whole lock wait again (2 s per request under FPM).
struct RequiredFailure {
    pid: u32,
    path: PathBuf,
    slots: u32,
    at_ms: u64,
    error: resilient_core::Error,
}

static REQUIRED_FAILURE: Mutex<Option<RequiredFailure>> = Mutex::new(None);

/// Bumped whenever the cached segment is replaced or a segment setting is given a value, so a
/// [`Rebinding`] that checked recently knows, with one load, whether its segment is still the
/// current one.
static GENERATION: AtomicU64 = AtomicU64::new(0);

/// The pid that already logged the degraded-mode message (once per process).
static LOGGED_PID: AtomicU32 = AtomicU32::new(0);

fn config_error(message: String) -> PhpException {
    exceptions::error(Kind::SharedMemoryError, message, 0)
}

/// True when no process created the segment yet and one could (the file is absent, its folder
/// is there). What only reads the host's state checks this first and finds nothing: opening
/// the segment creates it, mode 0600 for this process's user, and made by an operator's user
/// at a `resilient.shm_path` php-fpm shares, it would lock the FPM workers out. False when this
/// process already uses the segment or is in the degraded mode for it (the file could not be
/// made: a full or read-only file system), and when the file system cannot say (a folder this
/// user may not search): opening then says why, and `Resilient\Metrics` throws it.
pub fn not_created_yet() -> Result<bool, PhpException> {
    let path = path()?;
    if known_here(&path)? {
        return Ok(false);
    }
    Ok(match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            path.parent().is_some_and(|dir| dir.is_dir())
        }
        _ => false,
    })
}

/// True when this process is in the degraded mode for the segment at `path`, or has it open,
/// shared, and found its file valid less than `REVALIDATE_MS` ago ([`open`] would use it
/// without looking at the file: asking the file system again, a path walk per scrape, would
/// tell nothing new).
fn known_here(path: &std::path::Path) -> Result<bool, PhpException> {
    // Keyed as `open` keys its cache: another slot count or `shm_required` opens anew.
    let slots = ini::shm_slots().map_err(config_error)?;
    let required = ini::shm_required().map_err(config_error)?;
    let now = resilient_core::clock::monotonic_ms();
    let cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(cache.as_ref().is_some_and(|c| {
        c.pid == resilient_core::current_pid()
            && c.path == path
            && c.slots == slots
            && c.required == required
            && (c.degraded.is_some()
                || !c.recheck && now.saturating_sub(c.checked_ms) < REVALIDATE_MS)
    }))
}

/// The path in effect: `resilient.shm_path`, or the per-uid default.
pub fn path() -> Result<PathBuf, PhpException> {
    Ok(match ini::shm_path().map_err(config_error)? {
        Some(p) => PathBuf::from(p),
        // SAFETY: getuid never fails.
        // The layout version is part of the name: after an upgrade that changes the layout,
        // new processes start a new file instead of refusing the old one (still in use by
        // workers of the previous version until they are replaced).
        None => PathBuf::from(format!(
            "/dev/shm/resilient-{}.v{}.shm",
            unsafe { libc::getuid() },
            resilient_core::layout::LAYOUT_VERSION
        )),
    })
}

/// The segment for this process, opening (or creating) it on first use; a
/// process-local one in the degraded mode. Throws `Resilient\SharedMemoryError`
/// for a bad `resilient.shm_*` value, and for an unusable segment when
/// `resilient.shm_required` is on.
pub fn shared() -> Result<Arc<Segment>, PhpException> {
    Ok(open()?.0)
}

/// Why this process's guards are process-local (the degraded mode), `None`
/// when they use the shared segment. Opens the segment if needed.
pub fn degraded_reason() -> Result<Option<String>, PhpException> {
    Ok(open()?.1)
}

/// The host's segment, for what only the host's counters can answer (`Resilient\Metrics`):
/// in the degraded mode `Resilient\SharedMemoryError` naming why, never this process's own
/// counters passed off as the host's (under FPM, each worker's: a scrape would see counters go
/// down). `what` names the caller.
pub fn host_wide(what: &str) -> Result<Arc<Segment>, PhpException> {
    match open()? {
        (segment, None) => Ok(segment),
        (_, Some(reason)) => Err(config_error(format!(
            "{what}: the host's counters are in the shared memory segment, which this process \
             cannot use ({reason}); this process's own counters are not the host's"
        ))),
    }
}

fn open() -> Result<(Arc<Segment>, Option<String>), PhpException> {
    let pid = resilient_core::current_pid();
    let path = path()?;
    let slots = ini::shm_slots().map_err(config_error)?;
    let required = ini::shm_required().map_err(config_error)?;
    let now = resilient_core::clock::monotonic_ms();
    let mut cache = CACHE.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(c) = cache.as_mut() {
        if c.pid == pid && c.path == path && c.slots == slots && c.required == required {
            if !c.recheck && now.saturating_sub(c.checked_ms) < REVALIDATE_MS {
                return Ok((c.segment.clone(), c.degraded.clone()));
            }
            c.checked_ms = now;
            c.recheck = false;
            match &c.degraded {
                None if c.segment.still_valid() => return Ok((c.segment.clone(), None)),
                // Removed, replaced or shrunk: said, since the counts start afresh in a new
                // file (a cleaner that removed a segment in use is otherwise never seen).
                None => errors::log_warning(&format!(
                    "resilient: shared memory segment {} was removed, replaced or shrunk while \
                     in use; opening the path again (a new file's counters, funnels and \
                     breakers start afresh)",
                    path.display()
                )),
                // Degraded: has the file become usable (removed, fixed, space freed)? Asked
                // without waiting for anyone's lock; until then the process-local segment
                // stays, with its counts.
                Some(_) => match Segment::try_open(&path, slots) {
                    Ok(shared) => {
                        errors::log_warning(&format!(
                            "resilient: shared memory segment {} usable again; funnels and retry \
                             budgets count host-wide again",
                            path.display()
                        ));
                        let shared = Arc::new(shared);
                        c.segment = shared.clone();
                        c.degraded = None;
                        GENERATION.fetch_add(1, Ordering::Release);
                        // Should it degrade again, that is said again.
                        LOGGED_PID.store(0, Ordering::Relaxed);
                        return Ok((shared, None));
                    }
                    // Still unusable, maybe for another reason now (fixed, then broken
                    // otherwise): the reason given is today's.
                    Err(e) => {
                        let reason = e.to_string();
                        c.degraded = Some(reason.clone());
                        return Ok((c.segment.clone(), Some(reason)));
                    }
                },
            }
        }
    }
    // Required, and failed before: the same error for a while, then a try without waiting.
    let mut failed = REQUIRED_FAILURE
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    let failed_before = required
        && failed
            .as_ref()
            .is_some_and(|f| f.pid == pid && f.path == path && f.slots == slots);
    if failed_before {
        if let Some(f) = failed
            .as_ref()
            .filter(|f| now.saturating_sub(f.at_ms) < REVALIDATE_MS)
        {
            return Err(errors::to_php(&f.error));
        }
    }
    let opened = if failed_before {
        Segment::try_open(&path, slots)
    } else {
        Segment::open(&path, slots)
    };
    if opened.is_ok() || !required {
        *failed = None;
    }
    let (segment, degraded) = match opened {
        Ok(s) => (s, None),
        Err(e) if e.is_segment() && !required => {
            let reason = e.to_string();
            log_once(pid, &reason);
            (
                Segment::local(&path, slots).map_err(errors::php)?,
                Some(reason),
            )
        }
        Err(e) => {
            // Required and unusable: no use of the old mapping either, until the file is
            // usable again (each use tries to open it; a stale cache would go on counting in a
            // file nobody else maps, for up to a second at a time). The kept guards too: they
            // ask again at their next use.
            *cache = None;
            GENERATION.fetch_add(1, Ordering::Release);
            let thrown = errors::to_php(&e);
            *failed = Some(RequiredFailure {
                pid,
                path,
                slots,
                at_ms: now,
                error: e,
            });
            return Err(thrown);
        }
    };
    let segment = Arc::new(segment);
    GENERATION.fetch_add(1, Ordering::Release);
    *cache = Some(Cached {
        pid,
        path,
        slots,
        required,
        segment: segment.clone(),
        degraded: degraded.clone(),
        checked_ms: now,
        recheck: false,
    });
    Ok((segment, degraded))
}

/// Called when `resilient.shm_path`, `shm_slots` or `shm_required` is given a value (an
/// `ini_set()`, or the engine restoring one at a request's end): every [`Rebinding`] asks
/// `shared()` again at its next use instead of up to `REVALIDATE_MS` later, so a kept
/// `Funnel` counts in the file `Metrics::segmentPath()` names.
pub fn settings_changed() {
    GENERATION.fetch_add(1, Ordering::Release);
}

/// Called at a request's start: its first use of the segment checks the file again (one
/// `fstat`), so a request that follows a shrink, a removal or a replacement never goes through
/// the old mapping (a shrunk file's faults: SIGBUS). Within a request, and in a CLI process
/// between its jobs, the check runs at most every `REVALIDATE_MS`.
pub fn recheck_at_next_use() {
    if let Some(c) = CACHE
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .as_mut()
    {
        c.recheck = true;
    }
}

/// Writes the degraded-mode notice to PHP's error log, once per process.
fn log_once(pid: u32, reason: &str) {
    if LOGGED_PID.swap(pid, Ordering::Relaxed) == pid {
        return;
    }
    errors::log_warning(&format!(
        "resilient: shared memory unusable, falling back to process-local guards \
         (funnels and retry budgets now count this process only): {reason}. \
         Set resilient.shm_required=1 to make this an error; see docs/shared-memory.md"
    ));
}

/// A guard a PHP object keeps (a `Funnel`, a `RetryBudget`), on this process's current
/// segment: built again on it when the segment was replaced since (the file removed, shrunk or
/// replaced, or usable again after the degraded mode), as a client is. Kept by a long-running
/// worker, it would otherwise count in a deleted file, or fault (SIGBUS) on a shrunk one.
///
/// Between the checks `shared()` makes (at most once a second), a use costs one load: the
/// guard asks `shared()` again only when a second has passed since it last did, when it runs
/// in another process (a fork), when another caller found the segment replaced, or when a
/// segment setting was given a value ([`settings_changed`]).
pub struct Rebinding<T> {
    current: std::cell::RefCell<(Arc<Segment>, T)>,
    /// When `shared()` was last asked: (pid, monotonic ms, [`GENERATION`] then).
    asked: std::cell::Cell<(u32, u64, u64)>,
}

impl<T: Clone> Rebinding<T> {
    /// Builds the guard on the current segment.
    pub fn new(
        build: impl FnOnce(Arc<Segment>) -> Result<T, PhpException>,
    ) -> Result<Self, PhpException> {
        let asked = asked_now(resilient_core::clock::monotonic_ms());
        let segment = shared()?;
        let guard = build(segment.clone())?;
        Ok(Rebinding {
            current: std::cell::RefCell::new((segment, guard)),
            asked: std::cell::Cell::new(asked),
        })
    }

    /// The segment and the guard on it, built again by `build` first when the segment changed.
    pub fn get(
        &self,
        build: impl FnOnce(Arc<Segment>) -> Result<T, PhpException>,
    ) -> Result<(Arc<Segment>, T), PhpException> {
        let now_ms = resilient_core::clock::monotonic_ms();
        self.with(now_ms, build, |segment, guard, _| {
            (segment.clone(), guard.clone())
        })
    }

    /// `f` on the segment and the guard, as [`get`](Self::get) finds them, and the time for
    /// the guard's decision: `now_ms` (the caller's reading of the monotonic clock: one clock
    /// read and no clone on a funnel's or a budget's hot path), or the clock read again after
    /// asking `shared()`, which may have waited for the file's lock. Neither `build` nor `f`
    /// may run PHP code, which could use this guard again while it is borrowed.
    pub fn with<R>(
        &self,
        now_ms: u64,
        build: impl FnOnce(Arc<Segment>) -> Result<T, PhpException>,
        f: impl FnOnce(&Arc<Segment>, &T, u64) -> R,
    ) -> Result<R, PhpException> {
        let now = asked_now(now_ms);
        let (pid, ms, generation) = self.asked.get();
        let mut decide_ms = now_ms;
        if !(now.0 == pid && now.1.saturating_sub(ms) < REVALIDATE_MS && now.2 == generation) {
            let segment = shared()?;
            let mut current = self.current.borrow_mut();
            if !Arc::ptr_eq(&current.0, &segment) {
                // Not marked asked until built: a build that failed (the new file's table
                // full) must not leave the next uses on the old mapping.
                *current = (segment.clone(), build(segment)?);
            }
            self.asked.set(now);
            decide_ms = resilient_core::clock::monotonic_ms();
        }
        let current = self.current.borrow();
        Ok(f(&current.0, &current.1, decide_ms))
    }
}

/// (pid, monotonic ms, generation) at `now_ms`, read before asking `shared()`: a replacement
/// made during the ask bumps the generation past the one recorded, so the next use asks again.
fn asked_now(now_ms: u64) -> (u32, u64, u64) {
    (
        resilient_core::current_pid(),
        now_ms,
        GENERATION.load(Ordering::Acquire),
    )
}
