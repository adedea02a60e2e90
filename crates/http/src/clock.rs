//! Time as the attempt loop sees it.
//!
//! The loop needs three things from time: a monotonic clock for the deadline and attempt
//! durations, a wall clock to turn an HTTP-date `Retry-After` into a wait, and a way to sleep.
//! All three are injected so the tests run on virtual time and can assert exact waits.

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

/// A boxed, sendable future: what the injected traits return (no async-trait dependency).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Monotonic and wall time.
pub trait Clock: Send + Sync {
    /// `CLOCK_MONOTONIC` in nanoseconds: comparable across processes on this host, never jumps.
    fn monotonic_ns(&self) -> u64;
    /// Wall-clock time, used only to interpret HTTP-date `Retry-After` values.
    fn wall(&self) -> SystemTime;
    /// Monotonic milliseconds, the unit shared memory (funnel leases, budget window) uses.
    fn monotonic_ms(&self) -> u64 {
        self.monotonic_ns() / 1_000_000
    }
}

/// Sleeps between attempts. The real one is tokio's timer; the fake one advances a fake clock.
pub trait Sleeper: Send + Sync {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()>;
}

/// The real clocks: `clock_gettime(CLOCK_MONOTONIC)` and `SystemTime::now()`.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn monotonic_ns(&self) -> u64 {
        monotonic_ns()
    }
    fn wall(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// `CLOCK_MONOTONIC` in nanoseconds: the core's clock, the one shared memory is kept in.
pub use resilient_core::clock::monotonic_ns;

/// Sleeps on the tokio timer of the runtime that polls the future.
#[derive(Debug, Default, Clone, Copy)]
pub struct TokioSleeper;

impl Sleeper for TokioSleeper {
    fn sleep(&self, duration: Duration) -> BoxFuture<'static, ()> {
        Box::pin(tokio::time::sleep(duration))
    }
}
