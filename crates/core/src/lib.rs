//! PHP-free shared state for the `resilient` PHP extension.
//!
//! Every PHP-FPM worker and every CLI process of one user on a host maps the same
//! [`Segment`] (a file under `/dev/shm`), so a [`Funnel`] (concurrency limit) or a
//! [`RetryBudget`] decided in one process is seen by all the others in nanoseconds,
//! without a network round trip.
//!
//! The big picture:
//! - [`segment`] owns the mapping: creation, validation of a foreign or corrupt file,
//!   and a fixed table of named entries (`table`); a name's entry holds its funnel and
//!   metrics, and each retry budget and circuit breaker has an entry of its own ([`layout`]).
//! - [`funnel`] hands out [`Lease`]s from a 64-bit slot mask; a lease expires on the
//!   monotonic clock, and the slot of a dead process is reclaimed by the next acquire that
//!   finds no free slot, without waiting for the lease to expire. Dead means its pid is gone
//!   (`kill(pid, 0)`): the slot of a holder killed after another process took its pid comes
//!   back only when its lease expires or, killed in the middle of taking or giving back the
//!   slot (steps the expiry does not cover), when that other process ends.
//! - [`budget`] is a sliding window of epoch-tagged buckets: originals deposit, retries
//!   withdraw.
//! - [`adaptive_limit`] learns a funnel's limit from every attempt's latency and drops
//!   (`'limit' => 'auto'`): one limit per name, shared, updated with two atomic adds per attempt.
//! - [`breaker`] is the circuit breaker: a state word whose half-open ticket one CAS hands
//!   to exactly one process, and a sliding window of counts.
//! - [`metrics`]: per-name counters and latency histograms every process adds to.
//! - [`deadline`] is the per-process stack of nested deadlines.
//!
//! Time is injected: every time-dependent call takes `now_ms` (from
//! [`clock::monotonic_ms`] in production), so tests are exact and need no sleeps.
//!
//! ```
//! use std::{sync::Arc, time::Duration};
//! use resilient_core::{BudgetConfig, Funnel, FunnelConfig, RetryBudget, Segment};
//!
//! # let path = std::env::temp_dir().join(format!("resilient-doc-{}.shm", std::process::id()));
//! # let _ = std::fs::remove_file(&path);
//! let segment = Arc::new(Segment::open(&path, 16)?);
//!
//! // At most 2 in flight; background (CLI) callers may use 1, web callers both.
//! let funnel = Funnel::new(segment.clone(), "sap", FunnelConfig::new(2, 1, Duration::from_secs(20))?)?;
//! let (now, lease_ms) = (1_000, 20_000);
//! let background = funnel.admit(true, now, lease_ms).expect("one slot for the background");
//! assert!(funnel.admit(true, now, lease_ms).is_none(), "the other is reserved");
//! let web = funnel.admit(false, now, lease_ms).expect("the reserved slot");
//! assert_eq!(funnel.in_flight(now), 2);
//! drop((background, web)); // leases are RAII
//!
//! // Retries: 1 per window always, plus 10 % of the originals.
//! let budget = RetryBudget::new(segment, "sap", BudgetConfig::new(0.1, 1, Duration::from_secs(60))?)?;
//! budget.record_original(now);
//! assert!(budget.try_consume(now));
//! assert!(!budget.try_consume(now), "the floor is spent and 0.1 of an original is not a retry");
//! # std::fs::remove_file(&path)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod adaptive_limit;
pub mod breaker;
pub mod budget;
pub mod clock;
pub mod deadline;
mod error;
pub mod exposition;
pub mod funnel;
mod host;
pub mod layout;
mod liveness;
pub mod metrics;
mod pause;
pub mod segment;
pub mod signals;
mod table;
pub mod validate;

pub use adaptive_limit::{AdaptiveConfig, AdaptiveLimit, AdaptiveStats};
pub use breaker::{Admission, BreakerConfig, BreakerState, CircuitBreaker, Ticket, Transition};
pub use budget::{BudgetConfig, BudgetStats, RetryBudget};
pub use deadline::{DeadlineStack, Deadlines};
pub use error::Error;
pub use funnel::{Funnel, FunnelConfig, Lease, LeaseId};
pub use liveness::current_pid;
pub use metrics::{
    AttemptClass, CircuitState, FailureClass, Metrics, MetricsSnapshot, RefusalReason,
};
pub use segment::Segment;
