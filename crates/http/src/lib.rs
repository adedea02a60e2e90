//! resilient-http: a PHP-free HTTP client that makes outgoing calls safe when an upstream is
//! slow or down. The PHP extension (`src/` at the workspace root) is a thin binding over it.
//!
//! Policy apart from mechanism, one concept per module (all private; what a user needs is
//! re-exported here):
//!
//! - `options`: [`ClientConfig`], built with typed setters that own the value rules (each error
//!   a [`ConfigError`] naming the option).
//! - `request`: a request prepared once (URL join, query, body, headers, `Idempotency-Key`) and
//!   sent identically on every attempt. `response`: the final answer. `body_limit`: the response
//!   body buffer bounded by `max_body`.
//! - `backoff`: full jitter as a pure, seedable iterator of waits. `retry_after`: `Retry-After`
//!   (delta-seconds or HTTP-date) against an injected wall clock.
//! - `classify`: transient or final; which methods may be sent again.
//! - `policy`: pure decisions (limits per attempt, retry or give up, how long to wait), in the
//!   typed vocabulary of `decision` ([`Outcome`], [`RetryReason`], [`GiveUpReason`]).
//! - `call`: THE attempt loop, the single retry owner, over the injected mechanism: `clock`
//!   (monotonic + wall time, sleeper), `transport` (one attempt: hyper in `http1_transport` for
//!   plain http, reqwest in `reqwest_transport` for https), `guard` (the admission seam: each
//!   [`Guard`] asked before an attempt and told how it ended after; the [`RetryAllowance`]),
//!   `backend` (where the funnel, the budget and the breaker live: the host's shared memory
//!   here, Redis in `crates/redis`), `funnel_guard` and `breaker` (the shared memory's funnel
//!   and any backend's breaker as guards),
//!   `attempt` (one [`AttemptRecord`] per attempt for `on_attempt`), `call_events` (each call's
//!   start and end and each attempt, told without text: [`CallEvents`]) and `metrics_events`
//!   (host-wide metrics recorded through it).
//! - `pool`: sliding window over many calls, with the seed's batch rule.
//! - `runtime`: the per-process (fork-safe) tokio runtime and transport, and the driver that
//!   lets PHP run between polls. `lookup`: host names looked up on threads of their own, one
//!   per name under way, for both transports. `client`: all of it behind [`HttpClient`].
//! - `error`: [`Unavailable`] (opaque, with predicates); `config_error`: [`ConfigError`].
//!
//! # Example
//!
//! A guard that counts attempts, over a transport that answers 503 once, then 200:
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use resilient_http::*;
//!
//! struct Flaky(AtomicU32);
//! impl Transport for Flaky {
//!     fn send(&self, _: &PreparedRequest, _: AttemptLimits)
//!         -> BoxFuture<'static, Result<RawResponse, TransportError>> {
//!         let status = if self.0.fetch_add(1, Ordering::SeqCst) == 0 { 503 } else { 200 };
//!         Box::pin(async move {
//!             Ok(RawResponse { status, headers: vec![], body: b"ok".to_vec() })
//!         })
//!     }
//! }
//!
//! #[derive(Default)]
//! struct Count(AtomicU32);
//! impl Guard for Count {
//!     fn admit(&self, _attempt: u32, _now_ms: u64) -> Result<Permit, Refusal> {
//!         self.0.fetch_add(1, Ordering::SeqCst);
//!         Ok(Permit::free())
//!     }
//! }
//!
//! let mut config = ClientConfig::default();
//! config.set_base_url("http://upstream.test").unwrap();
//! config.set_timeout(Duration::from_millis(300)).unwrap();
//! config.set_backoff(Duration::ZERO, Duration::from_millis(1)).unwrap();
//! assert_eq!(
//!     config.set_max_attempts(0).unwrap_err().to_string(),
//!     "option 'max_attempts': must be an integer between 1 and 100, got 0"
//! );
//!
//! let count = Arc::new(Count::default());
//! let env = CallEnv::new(
//!     Arc::new(SystemClock),
//!     Arc::new(TokioSleeper),
//!     Arc::new(Flaky(AtomicU32::new(0))),
//! )
//! .guard(count.clone());
//! let client = HttpClient::new(config, Caps::default(), env.clone());
//! let request = client.prepare("GET", "/quote", RequestOptions::new()).unwrap();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
//! let response = runtime.block_on(client.call(env, request, None)).unwrap();
//! assert_eq!((response.status(), response.attempts()), (200, 2));
//! assert_eq!(count.0.load(Ordering::SeqCst), 2);
//! ```

mod attempt;
mod backend;
mod backoff;
mod body_limit;
mod body_memory;
mod breaker;
mod call;
mod call_events;
mod classify;
mod client;
mod client_cache;
mod clock;
mod config_error;
mod decision;
mod error;
mod fork_local;
mod funnel_guard;
mod guard;
mod http1_transport;
mod idle_pool;
mod lookup;
mod metrics_events;
mod multipart;
mod option_file;
mod options;
mod policy;
mod pool;
mod private_key;
mod redirect;
mod request;
mod reqwest_transport;
mod response;
mod response_body;
mod retry_after;
mod runtime;
mod time_left;
mod transport;
mod transport_options;

pub use attempt::{AttemptObserver, AttemptRecord, RecordLog};
pub use backend::{Backend, SharedMemory};
pub use backoff::FullJitter;
pub use body_memory::{BodyLimit, SharedBodyLimit};
pub use breaker::{BreakerGuard, BreakerStore};
pub use bytes::Bytes;
pub use call::{Call, CallEnv, Progress};
pub use call_events::{CallEnd, CallEvents};
pub use classify::Verdict;
pub use client::{HttpClient, HttpClientBuilder, PROBE_MARGIN};
pub use clock::{BoxFuture, Clock, Sleeper, SystemClock, TokioSleeper};
pub use config_error::ConfigError;
pub use decision::{Decision, GiveUpReason, Outcome, RetryReason};
pub use error::{Unavailable, UnavailableKind};
pub use funnel_guard::LeaseRegistry;
pub use guard::{Ended, Guard, Permit, Refusal, RetryAllowance, FUNNEL_LEASE};
pub use http1_transport::Http1Transport;
pub use metrics_events::{attempt_class, end_open_attempts, refusal_of, MetricsEvents};
pub use multipart::{Multipart, Part, PartContents};
pub use option_file::{read_pem, MAX_PEM_FILE};
pub use options::{
    no_control_characters, parse_redis_url, shown_name, BackendKind, BackoffOptions, BudgetOptions,
    CircuitOptions, ClientConfig, FunnelOptions, OnBackendError, RedisUrl, MAX_ATTEMPTS,
};
pub use policy::{Caps, Policy};
pub use pool::{abort_abandoned_pools, BatchSummary};
pub use request::{shown_label, Body, PreparedRequest, RequestOptions};
pub use reqwest::header::{HeaderName, HeaderValue};
pub use reqwest::Url;
pub use reqwest_transport::ReqwestTransport;
pub use response::Response;
pub use runtime::{
    end_abandoned_tasks, process_io, Driven, ProcessIo, Wake, FORKED_MESSAGE, INTERRUPT_POLL,
};
pub use time_left::remaining as call_time_left;
pub use time_left::within as with_time_left;
pub use transport::{AttemptLimits, FailureKind, RawResponse, Transport, TransportError};
pub use transport_options::{BodyTarget, Identity, Proxy, Redirects, TransportOptions, Verify};
