//! `HttpClient`: a configuration, its policy and its mechanism, ready to call.
//!
//! What the PHP `Resilient\Client` wraps: `prepare` validates a request against the options,
//! `call` runs the loop for one request, `pool` runs many under a sliding window.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use crate::attempt::AttemptObserver;
use crate::backend::Backend;
use crate::breaker::BreakerGuard;
use crate::call::{Call, CallEnv};
use crate::call_events::CallEvents;
use crate::clock::{Clock, Sleeper, SystemClock, TokioSleeper};
use crate::config_error::ConfigError;
use crate::error::Unavailable;
use crate::guard::{Guard, RetryAllowance};
use crate::options::ClientConfig;
use crate::policy::{Caps, Policy};
use crate::pool::{run_pool, BatchSummary, PoolItem};
use crate::transport::Transport;
use std::sync::Mutex;

use reqwest::Url;

use crate::request::{join_url, prepare_at, PreparedRequest, RequestOptions};
use crate::response::Response;

/// How long a circuit breaker's probe may stay silent beyond its attempt timeout before its
/// ticket is given up (its process was killed, or it hangs) and another caller probes.
pub const PROBE_MARGIN: Duration = Duration::from_millis(250);

/// Joined URLs kept per client (paths repeat: parsing a URL is a large part of preparing).
const URL_CACHE: usize = 64;

/// A configured client.
#[derive(Clone)]
pub struct HttpClient {
    config: Arc<ClientConfig>,
    policy: Arc<Policy>,
    /// The calling context's caps, applied again to a request's own timeouts.
    caps: Caps,
    env: CallEnv,
    urls: Arc<Mutex<Vec<(String, Url)>>>,
}

/// Builds an [`HttpClient`]: `HttpClient::builder(config).caps(..).guard(..).observer(..)`.
/// The mechanism defaults to the system clock, tokio's sleeper and this process's transport.
pub struct HttpClientBuilder {
    config: ClientConfig,
    caps: Caps,
    transport: Option<Arc<dyn Transport>>,
    clock: Arc<dyn Clock>,
    sleeper: Arc<dyn Sleeper>,
    guards: Vec<Arc<dyn Guard>>,
    allowance: Option<Arc<dyn RetryAllowance>>,
    observer: Option<Arc<dyn AttemptObserver>>,
    events: Option<Arc<dyn CallEvents>>,
}

impl HttpClientBuilder {
    /// Limits of the calling context (web caps), applied on top of the options.
    pub fn caps(mut self, caps: Caps) -> Self {
        self.caps = caps;
        self
    }
    pub fn transport(mut self, transport: Arc<dyn Transport>) -> Self {
        self.transport = Some(transport);
        self
    }
    pub fn clock(mut self, clock: Arc<dyn Clock>, sleeper: Arc<dyn Sleeper>) -> Self {
        self.clock = clock;
        self.sleeper = sleeper;
        self
    }
    /// Adds an admission guard after those already there.
    pub fn guard(mut self, guard: Arc<dyn Guard>) -> Self {
        self.guards.push(guard);
        self
    }
    pub fn allowance(mut self, allowance: Arc<dyn RetryAllowance>) -> Self {
        self.allowance = Some(allowance);
        self
    }
    pub fn observer(mut self, observer: Arc<dyn AttemptObserver>) -> Self {
        self.observer = Some(observer);
        self
    }
    /// Sets who is told each call's start and end and each attempt (host-wide metrics).
    pub fn events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }
    /// Whether the options ask for shared state (a funnel, a retry budget or a circuit breaker).
    pub fn wants_backend(&self) -> bool {
        self.config.funnel.is_some()
            || self.config.budget.is_some()
            || self.config.circuit.is_some()
    }
    /// Adds the circuit breaker, the funnel guard and the retry budget the options ask for, from
    /// `backend`, once for this client (named `name`; `background`: no reserved funnel slots).
    /// The breaker comes before the funnel: an open circuit never takes a slot. A probe's ticket
    /// is given up after the attempt timeout plus [`PROBE_MARGIN`].
    pub fn backend(
        mut self,
        backend: &dyn Backend,
        name: &str,
        background: bool,
    ) -> Result<Self, resilient_core::Error> {
        let policy = HttpClient::policy_for(&self.config, self.caps);
        if let Some(c) = self.config.circuit {
            // Within the longest duration a setting may have (a `timeout` of a year is one).
            let probe = policy
                .timeout
                .saturating_add(PROBE_MARGIN)
                .min(resilient_core::validate::MAX_DURATION);
            let config = c.breaker_config(probe)?;
            let store = backend.breaker(name, config)?;
            let mut guard = BreakerGuard::new(store, &policy.retry_on, policy.timeout);
            if let Some(events) = &self.events {
                guard = guard.with_events(events.clone());
            }
            self.guards.push(Arc::new(guard));
        }
        if let Some(f) = self.config.funnel {
            let config = f.config(policy.timeout)?;
            self.guards.push(backend.funnel(name, config, background)?);
        }
        if let Some(b) = self.config.budget {
            let config = resilient_core::BudgetConfig::new(b.ratio, b.floor, b.window)?;
            self.allowance = Some(backend.budget(name, config)?);
        }
        Ok(self)
    }
    /// The client; without a transport set, this process's (fork-safe) one, or, when this
    /// process's I/O runtime cannot start, one that fails each attempt saying why
    /// (`runtime::process_transport`).
    pub fn build(self) -> HttpClient {
        let transport = self
            .transport
            .unwrap_or_else(crate::runtime::process_transport);
        let mut env = CallEnv::new(self.clock, self.sleeper, transport);
        for guard in self.guards {
            env = env.guard(guard);
        }
        if let Some(allowance) = self.allowance {
            env = env.allowance(allowance);
        }
        if let Some(observer) = self.observer {
            env = env.observer(observer);
        }
        if let Some(events) = self.events {
            env = env.events(events);
        }
        HttpClient::new(self.config, self.caps, env)
    }
}

impl HttpClient {
    /// See [`HttpClientBuilder`].
    pub fn builder(config: ClientConfig) -> HttpClientBuilder {
        HttpClientBuilder {
            config,
            caps: Caps::default(),
            transport: None,
            clock: Arc::new(SystemClock),
            sleeper: Arc::new(TokioSleeper),
            guards: Vec::new(),
            allowance: None,
            observer: None,
            events: None,
        }
    }

    /// `caps`: limits of the calling context (web caps), applied on top of the options.
    pub fn new(config: ClientConfig, caps: Caps, env: CallEnv) -> Self {
        let policy = Self::policy_for(&config, caps);
        Self {
            config: Arc::new(config),
            policy: Arc::new(policy),
            caps,
            env,
            urls: Arc::default(),
        }
    }

    /// The numbers the attempt loop runs on: the options, then the caller's caps.
    pub fn policy_for(config: &ClientConfig, caps: Caps) -> Policy {
        Policy {
            timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            deadline: config.deadline,
            max_attempts: config.max_attempts,
            backoff_base: config.backoff.base,
            backoff_cap: config.backoff.cap,
            retry_on: config.retry_on.clone(),
            max_retry_after: config.max_retry_after,
            funnel_wait: config.funnel.map_or(Duration::ZERO, |f| f.wait),
            max_body: config.max_body,
            timeout_capped_by: None,
            max_attempts_capped_by: None,
        }
        .capped(caps)
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }
    pub fn policy(&self) -> &Policy {
        &self.policy
    }
    pub fn env(&self) -> &CallEnv {
        &self.env
    }

    /// Validates and prepares one request.
    pub fn prepare(
        &self,
        method: &str,
        path: &str,
        options: RequestOptions,
    ) -> Result<Arc<PreparedRequest>, ConfigError> {
        let url = {
            let mut urls = self.urls.lock().unwrap_or_else(|e| e.into_inner());
            match urls.iter().find(|(p, _)| p == path) {
                Some((_, url)) => url.clone(),
                None => {
                    let url = join_url(self.config.base_url.as_ref(), path)?;
                    if urls.len() >= URL_CACHE {
                        urls.remove(0);
                    }
                    urls.push((path.to_string(), url.clone()));
                    url
                }
            }
        };
        prepare_at(&self.config, method, url, options).map(Arc::new)
    }

    /// The policy for one request: the client's, or with the request's own `timeout` /
    /// `connect_timeout` (the calling context's caps still apply).
    fn policy_of(&self, request: &PreparedRequest) -> Arc<Policy> {
        if request.timeout.is_none() && request.connect_timeout.is_none() {
            return self.policy.clone();
        }
        let mut policy = Self::policy_for(&self.config, Caps::default());
        if let Some(t) = request.timeout {
            policy.timeout = t;
        }
        if let Some(c) = request.connect_timeout {
            policy.connect_timeout = c;
        }
        Arc::new(policy.capped(self.caps))
    }

    /// One call. `env` overrides the client's mechanism for this call (e.g. with an observer).
    pub fn call(
        &self,
        env: CallEnv,
        request: Arc<PreparedRequest>,
        enclosing_remaining: Option<Duration>,
    ) -> impl Future<Output = Result<Response, Unavailable>> + Send + 'static {
        Call::start(env, self.policy_of(&request), request, enclosing_remaining).run()
    }

    /// A call of `request` that could not be sent at all: this process's I/O runtime did not
    /// start (`why`). Counted as any call is (an original, unavailable, no attempt), and ended
    /// as [`Unavailable::not_sent`] says.
    pub fn not_sent(&self, request: &PreparedRequest, why: &str) -> Unavailable {
        let unavailable = Unavailable::not_sent(request, why);
        if let Some(events) = self.env.told() {
            events.call_started();
            events.call_ended(crate::call_events::CallEnd {
                attempts: 0,
                result: Err(crate::UnavailableKind::UpstreamFailed),
            });
        }
        unavailable
    }

    /// Many calls, at most `concurrency` in flight, results in input order.
    pub fn pool(
        &self,
        env: CallEnv,
        requests: Vec<Arc<PreparedRequest>>,
        concurrency: usize,
        enclosing_remaining: Option<Duration>,
    ) -> impl Future<Output = (Vec<Result<Response, Unavailable>>, BatchSummary)> + Send + 'static
    {
        let items = requests
            .into_iter()
            .map(|request| PoolItem {
                policy: self.policy_of(&request),
                request,
            })
            .collect();
        run_pool(env, items, concurrency, enclosing_remaining)
    }
}
