//! resilient-redis: the funnel, retry budget and circuit breaker of `resilient` kept in a Redis
//! server, so a limit belongs to every host that shares it (docs/redis.md).
//!
//! PHP-free. [`Redis`] implements `resilient_http::Backend`; the binding builds one per client
//! from its `backend` URL and `on_backend_error`. Modules:
//! - `target`: the URL (never shown: it may hold a password), key prefix, hash-tagged keys;
//! - `connection`: this process's one connection per server (opened again after fork),
//!   timeouts from the request's deadline, back-off after a failure; `lookup`: the host name's
//!   lookup, bounded by the same wait; `connect_thread`: each connect with its handshake,
//!   bounded too;
//! - `scripts`: the Lua scripts, one EVALSHA per decision, on the server's clock;
//! - `funnel`, `budget`, `breaker`: the guard, the retry allowance and the breaker store;
//! - `backend`: [`Redis`] and the `on_backend_error` behaviours;
//! - `token`: lease tokens unique across hosts; `leftovers`: the slots this process may hold
//!   (held, a release not sent yet, an admission never answered), given back with the next
//!   command or at request end;
//! - `report`: the first error of each kind Redis answers (a wrong password...), reported.

mod backend;
mod breaker;
mod budget;
mod connect_thread;
mod connection;
mod funnel;
mod leftovers;
mod lookup;
mod report;
mod scripts;
mod target;
mod token;

pub use backend::Redis;
pub use connection::{Route, Server, Unreachable, FIRST_BACKOFF, MAX_BACKOFF, MAX_IDLE_SERVERS};
pub use funnel::{FIRST_QUIET_MS, MAX_QUIET_MS};
pub use leftovers::{release_leftovers, release_leftovers_at_exit, releases_owed};
pub use lookup::Resolver;
pub use report::report_to;
/// The budget's script, for the test that checks its arithmetic against the shared memory's.
#[doc(hidden)]
pub use scripts::{BUDGET, GIVE_BACK};
pub use target::{Target, DEFAULT_PREFIX, DEFAULT_TIMEOUT, QUERY_PARAMETERS};
