//! Signals kept for the PHP thread.
//!
//! PHP handles signals on its own thread: a queue worker's `pcntl_async_signals` handlers
//! (Laravel enforces a job's timeout with `pcntl_alarm`), FPM's graceful-stop handler,
//! `max_execution_time`'s timer. A signal sent to the process goes to any one of its threads
//! that does not block it, so a thread of ours that left them open could run PHP's handler
//! beside the PHP thread, which pcntl's queue of pending signals is not made for. Every thread
//! the extension starts therefore blocks them all, for its whole life.
//!
//! The PHP thread itself may hold them off for one short operation ([`HeldOff`]); a signal
//! that arrives meanwhile is delivered when the operation ends.

use std::io;
use std::thread::{Builder, JoinHandle};

/// The calling thread's signal mask as it was before every signal was blocked; put back on
/// drop, on the same thread.
pub struct HeldOff {
    before: libc::sigset_t,
    /// A thread's mask is put back on that thread.
    _same_thread: std::marker::PhantomData<*const ()>,
}

impl HeldOff {
    /// Blocks every signal on the calling thread until the value is dropped.
    pub fn new() -> Self {
        Self {
            before: block_all(),
            _same_thread: std::marker::PhantomData,
        }
    }
}

impl Default for HeldOff {
    fn default() -> Self {
        Self::new()
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

/// Blocks every signal on the calling thread (SIGKILL and SIGSTOP stay deliverable: the
/// kernel ignores them in a mask) and returns the mask it had. For a thread started by code
/// that is not ours (tokio's blocking pool): call it first thing on the new thread.
pub fn block_all() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, filled by sigfillset/pthread_sigmask before use.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        before
    }
}

/// Spawns a thread that blocks every signal from its first instruction: a new thread inherits
/// its creator's mask, so the creator holds them off while it spawns.
pub fn spawn<F, T>(builder: Builder, f: F) -> io::Result<JoinHandle<T>>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let _held = HeldOff::new();
    builder.spawn(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(signal: libc::c_int) -> bool {
        // SAFETY: reads the calling thread's mask into a zeroed set.
        unsafe {
            let mut now: libc::sigset_t = std::mem::zeroed();
            libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut now);
            libc::sigismember(&now, signal) == 1
        }
    }

    #[test]
    fn a_spawned_thread_blocks_every_signal_and_its_creator_gets_its_mask_back() {
        assert!(!blocked(libc::SIGALRM));
        let spawned = spawn(Builder::new(), || {
            [libc::SIGALRM, libc::SIGTERM, libc::SIGINT, libc::SIGPROF].map(blocked)
        })
        .unwrap();
        assert_eq!(spawned.join().unwrap(), [true; 4]);
        assert!(!blocked(libc::SIGALRM), "the creator's mask is back");
    }

    #[test]
    fn held_off_blocks_until_dropped() {
        let held = HeldOff::new();
        assert!(blocked(libc::SIGTERM));
        drop(held);
        assert!(!blocked(libc::SIGTERM));
    }
}
