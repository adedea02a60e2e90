//! `HttpClient`: a configuration, its policy and its mechanism, ready to call.
//!
//! What the PHP `Resilient\Client` wraps: `prepare` validates a request against the options,
//! `call` runs the loop for one request, `pool` runs many under a sliding window.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::call::{Call, CallEnv};
use crate::config_error::ConfigError;
use crate::error::Unavailable;
use crate::options::ClientConfig;
use crate::policy::{Caps, Policy};
use crate::pool::{run_pool, BatchSummary, PoolItem};
use std::sync::Mutex;

use reqwest::Url;

use crate::request::{join_url, prepare_at, PreparedRequest};
use crate::response::Response;

/// Joined URLs kept per client (paths repeat: parsing a URL is a large part of preparing).
const URL_CACHE: usize = 64;

/// A configured client.
#[derive(Clone)]
pub struct HttpClient {
    config: Arc<ClientConfig>,
    policy: Arc<Policy>,
    env: CallEnv,
    urls: Arc<Mutex<Vec<(String, Url)>>>,
}

impl HttpClient {
    /// `caps`: limits of the calling context (web caps), applied on top of the options.
    pub fn new(config: ClientConfig, caps: Caps, env: CallEnv) -> Self {
        let policy = Self::policy_for(&config, caps);
        Self {
            config: Arc::new(config),
            policy: Arc::new(policy),
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
        options: &Value,
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

    /// One call. `env` overrides the client's mechanism for this call (e.g. with an observer).
    pub fn call(
        &self,
        env: CallEnv,
        request: Arc<PreparedRequest>,
        enclosing_remaining: Option<Duration>,
    ) -> impl Future<Output = Result<Response, Unavailable>> + Send + 'static {
        Call::start(env, self.policy.clone(), request, enclosing_remaining).run()
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
                request,
                policy: self.policy.clone(),
            })
            .collect();
        run_pool(env, items, concurrency, enclosing_remaining)
    }
}
