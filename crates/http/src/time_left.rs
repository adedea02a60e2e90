//! What is left of the call that is asking a guard or the retry allowance right now.
//!
//! A guard's `admit`, a permit's release and the allowance's decisions are synchronous and get
//! no deadline; a backend that talks to a server (Redis) needs one for its connect and read
//! timeouts. The loop sets it here, around each of those calls only (never across an `await`,
//! so calls interleaved on one thread never see each other's), as an absolute moment on the
//! real monotonic clock.

use std::cell::Cell;
use std::time::Duration;

thread_local! {
    /// The current call's deadline (`monotonic_ns`), if it has one.
    static DEADLINE_NS: Cell<Option<u64>> = const { Cell::new(None) };
}

/// What is left of the current call's deadline; `None`: no call is asking, or it has no
/// deadline (the backend then uses its own cap).
pub fn remaining() -> Option<Duration> {
    DEADLINE_NS
        .with(Cell::get)
        .map(|d| Duration::from_nanos(d.saturating_sub(crate::clock::monotonic_ns())))
}

/// Sets the deadline for the scope's life; the previous one comes back on drop.
pub(crate) struct Scope(Option<u64>);

/// `left`: the call's remaining time (`Duration::MAX`: none).
pub(crate) fn scope(left: Duration) -> Scope {
    let deadline = (left != Duration::MAX).then(|| {
        crate::clock::monotonic_ns().saturating_add(left.as_nanos().min(u64::MAX as u128) as u64)
    });
    Scope(DEADLINE_NS.with(|d| d.replace(deadline)))
}

impl Drop for Scope {
    fn drop(&mut self) {
        DEADLINE_NS.with(|d| d.set(self.0));
    }
}

/// Runs `f` as a call with `left` to go: what a backend asks Redis outside any call (at the
/// process's end) shares that time, as a call's decisions share its deadline.
pub fn within<T>(left: Duration, f: impl FnOnce() -> T) -> T {
    let _scope = scope(left);
    f()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_sets_and_restores() {
        assert_eq!(remaining(), None);
        {
            let _outer = scope(Duration::from_secs(10));
            let left = remaining().unwrap();
            assert!(left <= Duration::from_secs(10) && left > Duration::from_secs(9));
            {
                let _inner = scope(Duration::MAX);
                assert_eq!(remaining(), None);
            }
            assert!(remaining().is_some());
        }
        assert_eq!(remaining(), None);
    }
}
