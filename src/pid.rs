//! This process's id, cached, and correct in a child of `fork()`.
//!
//! `getpid()` is a real syscall in current glibc (~0.1 µs), and the lease path
//! needs the pid several times per acquire+release. The cache lives in a page
//! marked `MADV_WIPEONFORK`: the kernel hands a forked child a zeroed copy,
//! so the child sees 0 and asks the kernel again. No atfork handler (which
//! would dangle once PHP unloads the extension). If the page cannot be set
//! up, every call falls back to `getpid()`.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// The cache cell inside the wipe-on-fork page, or `None` when unavailable.
fn cell() -> Option<&'static AtomicU32> {
    static CELL: OnceLock<usize> = OnceLock::new();
    let addr = *CELL.get_or_init(|| {
        // SAFETY: a fresh anonymous private mapping, never unmapped.
        unsafe {
            let page = libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            );
            if page == libc::MAP_FAILED {
                return 0;
            }
            if libc::madvise(page, 4096, libc::MADV_WIPEONFORK) != 0 {
                libc::munmap(page, 4096);
                return 0;
            }
            page as usize
        }
    });
    // SAFETY: a live, page-aligned, zero-initialised mapping for the life of the process.
    (addr != 0).then(|| unsafe { &*(addr as *const AtomicU32) })
}

/// The current process id.
pub fn current() -> u32 {
    let Some(cell) = cell() else {
        return std::process::id();
    };
    match cell.load(Ordering::Relaxed) {
        0 => {
            let pid = std::process::id();
            cell.store(pid, Ordering::Relaxed);
            pid
        }
        pid => pid,
    }
}
