//! `resilient`: the PHP extension, a thin ext-php-rs binding over the
//! PHP-free `resilient-core` (shared-memory funnel, retry budget, deadline
//! stack) and `resilient-http` crates. No policy lives here: this crate turns
//! PHP arguments into core calls and core errors into PHP exceptions.
//!
//! - `ini`: php.ini settings (`resilient.*`), registered at MINIT; `info`: what phpinfo() shows.
//! - `hooks`: MINIT/MSHUTDOWN/RINIT/RSHUTDOWN, each under `catch_unwind`.
//! - `exceptions`: `Resilient\Unavailable` & co, registered at MINIT.
//! - `array_keys`: fixed array keys made once (the metrics' snapshot).
//! - `errors`: core error → PHP exception; `engine`: dlsym'd engine symbols.
//! - `segment`: the per-process, lazily opened shared-memory segment.
//! - `held`: leases to release at request end; `fatal`: and at a fatal error, before the
//!   shutdown functions run (but a suspended Fiber's: `fiber_states`).
//! - `funnel`, `budget`, `deadline`, `context`, `metrics`: the PHP classes;
//!   `construct_once`: their constructors refuse a second call.
//! - `client`, `response`: `Resilient\Client` / `Resilient\Response`; `options`: the
//!   client's options array → `resilient_http::ClientConfig` (shape and type, with `coerce`:
//!   PHP's coercive typing; `transport_options`: TLS, proxy, redirects, multipart, sink); the
//!   values' rules stay with the crate that uses them; `fallback`: the `fallback` option's
//!   metrics hook.

use ext_php_rs::prelude::*;

pub mod array_keys;
pub mod bailout;
pub mod budget;
pub mod client;
pub mod coerce;
pub mod collector;
pub mod construct_once;
pub mod context;
pub mod deadline;
pub mod engine;
pub mod errors;
pub mod exceptions;
pub mod fatal;
pub mod fiber_states;
pub mod funnel;
pub mod held;
pub mod hooks;
pub mod info;
pub mod ini;
pub mod interrupt;
pub mod metrics;
pub mod options;
pub mod response;
pub mod segment;
pub mod sensitive;
pub mod stack;
pub mod transport_options;

#[php_module]
pub fn get_module(module: ModuleBuilder) -> ModuleBuilder {
    let m = module
        .startup_function(hooks::module_startup)
        .shutdown_function(hooks::module_shutdown)
        .request_startup_function(hooks::request_startup)
        .request_shutdown_function(hooks::request_shutdown)
        .info_function(info::module_info)
        .class::<funnel::Funnel>()
        .class::<funnel::Lease>()
        .class::<budget::RetryBudget>()
        .class::<deadline::Deadline>()
        .class::<context::Context>();
    metrics::register(client::register(response::register(m)))
}
