//! Is a process still alive? Used to reclaim a dead holder's funnel slot without waiting for
//! its lease to expire (and to take over the close of a learned limit's interval from a dead
//! closer). A pid another process took since reads as alive, as does a zombie to a slot's
//! reclaim: only the lease's expiry (or that process's end) frees the slot then. A closer's
//! take-over, a cold path, also tells a zombie apart ([`pid_running`]). And this process's
//! pid, cached: `getpid` is a system call and the lease path needs the pid on every acquire
//! and release.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

/// True unless `pid` certainly does not exist. A pid we may not signal (EPERM) is alive.
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// [`pid_alive`], and not a zombie (killed, not yet reaped by its parent), which `kill(pid, 0)`
/// finds as it finds a live process. A file read (`/proc/<pid>/stat`): for cold paths only.
/// A `/proc` that cannot be read answers as [`pid_alive`] does.
pub(crate) fn pid_running(pid: u32) -> bool {
    pid_alive(pid) && !zombie(pid)
}

fn zombie(pid: u32) -> bool {
    let Ok(stat) = std::fs::read(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // "pid (comm) S ...": the command may hold spaces and parentheses; the state follows the
    // last ')'.
    stat.iter()
        .rposition(|&b| b == b')')
        .and_then(|i| stat.get(i + 2))
        .is_some_and(|state| matches!(state, b'Z' | b'X'))
}

/// The cache cell, in a page marked `MADV_WIPEONFORK`: the kernel gives a forked child
/// (pcntl_fork, the FPM master's workers) a zeroed copy, so the child sees 0 and asks
/// again. No atfork handler, which would dangle once PHP unloads the extension and then
/// forks (Apache's graceful restart). `None` when the page cannot be set up.
fn cell() -> Option<&'static AtomicU32> {
    static CELL: OnceLock<usize> = OnceLock::new();
    let addr = *CELL.get_or_init(|| {
        // SAFETY: a fresh anonymous private mapping, never unmapped once kept.
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

/// This process's id; correct in a forked child too (falls back to `getpid` every time
/// when the cache page is unavailable).
pub fn current_pid() -> u32 {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cached_pid_follows_a_fork() {
        let parent = current_pid();
        assert_eq!(parent, std::process::id());
        // SAFETY: the child only calls async-signal-safe-enough code and _exits.
        let child = unsafe { libc::fork() };
        if child == 0 {
            let ok = current_pid() == std::process::id() && current_pid() != parent;
            unsafe { libc::_exit(if ok { 0 } else { 1 }) };
        }
        let mut status = 0;
        unsafe { libc::waitpid(child, &mut status, 0) };
        assert!(
            libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
            "child saw a stale pid"
        );
        assert_eq!(current_pid(), parent);
    }
}
