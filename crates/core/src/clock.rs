//! The one clock shared state may use: `CLOCK_MONOTONIC`.
//!
//! `std::time::Instant` is opaque and cannot be compared across processes, and the wall
//! clock jumps; `CLOCK_MONOTONIC` is the same for every process on the host.

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    (ts.tv_sec as u64)
        .saturating_mul(1_000_000_000)
        .saturating_add(ts.tv_nsec as u64)
}

/// Milliseconds on `CLOCK_MONOTONIC`: the unit stored in shared memory.
pub fn monotonic_ms() -> u64 {
    monotonic_ns() / 1_000_000
}

/// Converts validated seconds to whole milliseconds, rounding up so a tiny positive
/// duration never becomes zero.
pub fn secs_to_ms(seconds: f64) -> u64 {
    (seconds * 1000.0).ceil() as u64
}

/// Converts validated seconds to nanoseconds.
pub fn secs_to_ns(seconds: f64) -> u64 {
    (seconds * 1e9).round() as u64
}
