//! Is a process still alive? Used to reclaim a dead holder's funnel slot at once instead
//! of waiting for its lease to expire.

/// True unless `pid` certainly does not exist. A pid we may not signal (EPERM) is alive.
pub(crate) fn pid_alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid as libc::pid_t, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// This process's id (not cached: a forked child has its own).
pub(crate) fn current_pid() -> u32 {
    std::process::id()
}
