//! PHP-free shared state for the `resilient` PHP extension.
//!
//! Every PHP-FPM worker and every CLI process of one user on a host maps the same
//! [`Segment`] (a file under `/dev/shm`), so a [`Funnel`] (concurrency limit) or a
//! [`RetryBudget`] decided in one process is seen by all the others in nanoseconds,
//! without a network round trip.
//!
//! The big picture:
//! - [`segment`] owns the mapping: creation, validation of a foreign or corrupt file,
//!   and a fixed table of named entries ([`table`]); one entry per name holds that
//!   name's funnel and budget state ([`layout`]).
//! - [`funnel`] hands out [`Lease`]s from a 64-bit slot mask; a lease expires on the
//!   monotonic clock and the slot of a dead process is reclaimed at once.
//! - [`budget`] is a sliding window of epoch-tagged buckets: originals deposit, retries
//!   withdraw.
//! - [`deadline`] is the per-process stack of nested deadlines.
//!
//! Time is injected: every time-dependent call takes `now_ms` (from
//! [`clock::monotonic_ms`] in production), so tests are exact and need no sleeps.

pub mod budget;
pub mod clock;
pub mod deadline;
mod error;
pub mod funnel;
pub mod layout;
mod liveness;
pub mod segment;
mod table;
pub mod validate;

pub use budget::{BudgetConfig, BudgetStats, RetryBudget};
pub use deadline::DeadlineStack;
pub use error::Error;
pub use funnel::{Funnel, FunnelConfig, Lease, LeaseId};
pub use liveness::current_pid;
pub use segment::Segment;
