//! resilient-http: a PHP-free HTTP client that makes outgoing calls safe when an upstream is
//! slow or down. The PHP extension (`src/` at the workspace root) is a thin binding over it.
//!
//! Policy apart from mechanism, one concept per module:
//!
//! - [`options`]: `ClientConfig`, parsed and validated from a JSON tree (strict: unknown keys
//!   and bad values are errors naming the option).
//! - [`request`]: a request prepared once (URL join, query, body, headers, `Idempotency-Key`)
//!   and sent identically on every attempt. [`response`]: the final answer.
//!   [`body_limit`]: the response body buffer bounded by `max_body`.
//! - [`backoff`]: full jitter as a pure, seedable iterator of waits.
//!   [`retry_after`]: `Retry-After` (delta-seconds or HTTP-date) against an injected wall clock.
//! - [`classify`]: transient or final; which methods may be sent again.
//! - [`policy`]: pure decisions (limits per attempt, retry or give up, how long to wait).
//! - [`call`]: THE attempt loop, the single retry owner, over the injected mechanism:
//!   [`clock`] (monotonic + wall time, sleeper), [`transport`] (one attempt; reqwest in
//!   [`http1_transport`] for plain http, [`reqwest_transport`] for https), [`guard`] (the admission seam: each guard asked before
//!   an attempt and told its outcome after; the retry allowance), [`backend`] (where the funnel
//!   and budget live: `resilient_core`'s shared memory), [`attempt`] (one record per attempt for `on_attempt`).
//! - [`pool`]: sliding window over many calls, with the seed's batch rule.
//! - [`runtime`]: the per-process (fork-safe) tokio runtime and transport, and the driver
//!   that lets PHP run between polls. [`client`]: all of it behind one type.
//! - [`error`]: `Unavailable` (opaque, with predicates) and `ConfigError`.

pub mod attempt;
pub mod backend;
pub mod backoff;
pub mod body_limit;
pub mod call;
pub mod classify;
pub mod client;
pub mod clock;
mod decision;
pub mod error;
pub mod guard;
pub mod http1_transport;
pub mod options;
pub mod policy;
pub mod pool;
pub mod request;
pub mod reqwest_transport;
pub mod response;
pub mod retry_after;
pub mod runtime;
pub mod transport;

pub use attempt::{AttemptObserver, AttemptRecord};
pub use backend::{bind, Backend, LeaseRegistry, SharedMemory};
pub use call::{Call, CallEnv};
pub use client::HttpClient;
pub use clock::{Clock, Sleeper, SystemClock, TokioSleeper};
pub use decision::{Decision, GiveUpReason, Outcome, RetryReason};
pub use error::{ConfigError, Unavailable};
pub use guard::{Guard, Permit, Refusal, RetryAllowance};
pub use options::ClientConfig;
pub use policy::{Caps, Policy};
pub use request::PreparedRequest;
pub use response::Response;
pub use transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};
