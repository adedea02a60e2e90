//! The per-process handle on the shared-memory segment.
//!
//! Opened lazily on first use (a Funnel or RetryBudget constructor), never in
//! MINIT: the FPM master runs MINIT as root before forking, and the file must
//! be created by the user that runs PHP (the core refuses a file owned by
//! another uid). The default path `/dev/shm/resilient-<uid>.shm` is computed
//! here with `getuid()` for the same reason.
//!
//! The cache is keyed by pid, path and slot count: a child of `pcntl_fork`
//! opens its own handle instead of using the parent's, and a test that points
//! `resilient.shm_path` elsewhere with `ini_set()` gets the other file.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ext_php_rs::exception::PhpException;
use resilient_core::Segment;

use crate::{errors, ini};

struct Cached {
    pid: u32,
    path: PathBuf,
    slots: u32,
    segment: Arc<Segment>,
}

static CACHE: Mutex<Option<Cached>> = Mutex::new(None);

/// The path in effect: `resilient.shm_path`, or the per-uid default.
pub fn path() -> PathBuf {
    match ini::shm_path() {
        Some(p) => PathBuf::from(p),
        // SAFETY: getuid never fails.
        None => PathBuf::from(format!("/dev/shm/resilient-{}.shm", unsafe {
            libc::getuid()
        })),
    }
}

/// The shared segment for this process, opening (or creating) it on first use.
/// Errors (corrupt, foreign, world-writable file...) become
/// `Resilient\SharedMemoryError` with the core's message.
pub fn shared() -> Result<Arc<Segment>, PhpException> {
    let pid = resilient_core::current_pid();
    let path = path();
    let slots = ini::shm_slots();
    let mut cache = CACHE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if let Some(c) = cache.as_ref() {
        if c.pid == pid && c.path == path && c.slots == slots {
            return Ok(c.segment.clone());
        }
    }
    let segment = Arc::new(Segment::open(&path, slots).map_err(errors::php)?);
    *cache = Some(Cached {
        pid,
        path,
        slots,
        segment: segment.clone(),
    });
    Ok(segment)
}
