//! resilient-upstream: a real HTTP/1.1 server on loopback that plays the upstream API.
//!
//! Two faces, one server:
//! - **Mock** (`/k/{key}/...`, for the HTTP client's tests): each key answers by its script
//!   (statuses, headers such as Retry-After, delays, hangs, closed connections, slow bodies) and
//!   records every attempt (headers, times, concurrency at arrival). Keys are independent, so
//!   tests running in parallel use distinct keys. See [`script`] and [`recorder`].
//! - **Simulator** (`/sim/...`, for the lab): a fixed number of slots, a FIFO queue, a service
//!   time changeable at run time; a request whose client left still holds its slot until served.
//!   See [`sim`] and [`timeline`].
//!
//! Both are driven through the JSON control API under `/__control/...` ([`control`]); the
//! crate's README lists it with examples. The binary (`main.rs`) is the CLI; [`Upstream`] runs
//! the same server on a thread for Rust tests.

pub mod body;
pub mod clock;
pub mod control;
pub mod mock;
pub mod query;
pub mod received;
pub mod recorder;
pub mod script;
pub mod server;
pub mod sim;
pub mod timeline;

pub use server::{serve, serve_with, Upstream, HEADER_READ_TIMEOUT};
pub use sim::SimConfig;

/// Everything the handlers share.
pub struct App {
    pub clock: clock::Clock,
    pub keys: recorder::Keys,
    pub sim: sim::Sim,
}

impl App {
    pub fn new(sim: SimConfig) -> App {
        let clock = clock::Clock::new();
        App {
            clock,
            keys: recorder::Keys::default(),
            sim: sim::Sim::new(sim, clock),
        }
    }
}
