//! Signals held off while this thread talks to Redis.
//!
//! A read from a socket with a timeout (`SO_RCVTIMEO`, which bounds every Redis read) is never
//! restarted after a signal handler ran, whatever `SA_RESTART` says: it fails with `EINTR`.
//! PHP code that handles signals (a queue worker's `pcntl_async_signals`, its job timeout) then
//! cut replies short: the connection was out of step and dropped, and every decision during the
//! back-off that followed went to `on_backend_error` with Redis up. Held off for one operation
//! (bounded by its wait), a signal is delivered as soon as it ends and PHP runs its handler
//! then, as it would have at its next instruction anyway.

/// The thread's signal mask as it was, put back on drop.
pub(crate) struct HeldOff {
    before: libc::sigset_t,
    /// A thread's mask is put back on that thread.
    _same_thread: std::marker::PhantomData<*const ()>,
}

impl HeldOff {
    pub(crate) fn new() -> Self {
        // SAFETY: sigset_t is plain data, filled by sigfillset/pthread_sigmask before use;
        // SIGKILL and SIGSTOP stay deliverable (the kernel ignores them in a mask).
        unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut before: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
            Self {
                before,
                _same_thread: std::marker::PhantomData,
            }
        }
    }
}

impl Drop for HeldOff {
    fn drop(&mut self) {
        // SAFETY: restores the mask read in `new`, on the same thread.
        unsafe {
            libc::pthread_sigmask(libc::SIG_SETMASK, &self.before, std::ptr::null_mut());
        }
    }
}
