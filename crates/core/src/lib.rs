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
//!
//! # Example
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use resilient_core::{BudgetConfig, Funnel, FunnelConfig, RetryBudget, Segment};
//!
//! let path = std::env::temp_dir().join(format!("resilient-doc-{}.shm", std::process::id()));
//! let segment = Arc::new(Segment::open(&path, 64).unwrap());
//!
//! // At most 2 in flight; no reserve. A reserve >= limit cannot be constructed.
//! assert!(FunnelConfig::new(2, 2, Duration::from_secs(20)).is_err());
//! let funnel = Funnel::new(segment.clone(), "sap", FunnelConfig::new(2, 0, Duration::from_secs(20)).unwrap()).unwrap();
//! let cap = funnel.cap(true);
//! let (a, _b) = (funnel.try_acquire(cap, 0).unwrap(), funnel.try_acquire(cap, 0).unwrap());
//! assert!(funnel.try_acquire(cap, 0).is_none(), "full: fail fast");
//! a.release();
//! assert!(funnel.try_acquire(cap, 1).is_some());
//!
//! // Retries: 5 + 10 % of the originals over 60 s. A zero window cannot be constructed.
//! assert!(BudgetConfig::new(0.1, 5, Duration::ZERO).is_err());
//! let budget = RetryBudget::new(segment, "sap", BudgetConfig::new(0.1, 5, Duration::from_secs(60)).unwrap()).unwrap();
//! budget.record_original(0);
//! assert_eq!((0..10).filter(|_| budget.try_consume(0)).count(), 5);
//! std::fs::remove_file(&path).ok();
//! ```

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
