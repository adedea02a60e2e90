//! Time stamps for recorded rows.
//!
//! `t_ms` is monotonic milliseconds since the server started (what tests subtract to measure
//! waits between attempts); `unix_ms` is the wall clock, for lining rows up with a load
//! generator's own log.

use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The server's start instant; cheap to copy into guards and tasks.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: Instant,
}

impl Clock {
    pub fn new() -> Self {
        Clock {
            start: Instant::now(),
        }
    }

    /// Monotonic milliseconds since the server started.
    pub fn t_ms(&self) -> f64 {
        self.start.elapsed().as_secs_f64() * 1000.0
    }

    /// Wall-clock milliseconds since the Unix epoch.
    pub fn unix_ms(&self) -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0)
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::new()
    }
}
