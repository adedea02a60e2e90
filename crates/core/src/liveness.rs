//! Is a process still alive? Used to reclaim a dead holder's funnel slot at once instead
//! of waiting for its lease to expire. Also this process's pid, cached: `getpid` is a
//! system call and the funnel needs it on every acquire.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

/// True unless `pid` certainly does not exist. A pid we may not signal (EPERM) is alive.
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// 0 = unknown; reset in the child of every fork (pcntl_fork, the FPM master's workers).
static PID: AtomicU32 = AtomicU32::new(0);
static ATFORK: Once = Once::new();

extern "C" fn forget_pid_in_child() {
    PID.store(0, Ordering::Relaxed);
}

/// This process's id; correct in a forked child too.
pub(crate) fn current_pid() -> u32 {
    let pid = PID.load(Ordering::Relaxed);
    if pid != 0 {
        return pid;
    }
    ATFORK.call_once(|| {
        // SAFETY: registering a handler that only stores to an atomic (async-signal-safe).
        unsafe { libc::pthread_atfork(None, None, Some(forget_pid_in_child)) };
    });
    let pid = std::process::id();
    PID.store(pid, Ordering::Relaxed);
    pid
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
