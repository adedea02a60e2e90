//! Lease tokens: unique across the hosts and processes of a fleet (pids are not), so a release
//! can only ever remove its own lease.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// A new token: 64 random bits drawn once per process (again after fork) and a counter.
pub fn next() -> String {
    static PROCESS: Mutex<(u32, u64)> = Mutex::new((0, 0));
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let pid = resilient_core::current_pid();
    let mut p = PROCESS.lock().unwrap_or_else(|e| e.into_inner());
    if p.0 != pid {
        *p = (pid, random_u64());
    }
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:016x}{n:x}", p.1)
}

fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: writes at most 8 bytes into `buf`.
    let got = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if got == 8 {
        u64::from_ne_bytes(buf)
    } else {
        // No getrandom: the clock and the pid still tell processes apart in practice.
        resilient_core::clock::monotonic_ns() ^ (u64::from(std::process::id()) << 40)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn tokens_differ() {
        let a = super::next();
        let b = super::next();
        assert_ne!(a, b);
        assert_eq!(&a[..16], &b[..16], "one process, one prefix");
    }
}
