//! [`Redis`]: the `resilient_http::Backend` whose funnel, retry budget and breaker live in a
//! Redis server shared by every host, with a per-client answer for when Redis cannot answer in
//! time ([`OnBackendError`]).

use std::sync::Arc;

use resilient_core::funnel::BACKGROUND_DEMAND_MS;
use resilient_core::{BreakerConfig, BudgetConfig, Error, FunnelConfig};
use resilient_http::{Backend, BreakerStore, CallEvents, Guard, OnBackendError, RetryAllowance};

use crate::breaker::RedisBreaker;
use crate::budget::RedisBudget;
use crate::connection::Server;
use crate::funnel::{RedisFunnel, Share};

/// What a guard does when Redis gave no answer: one of the three `on_backend_error` behaviours,
/// each use told to the name's metrics.
pub(crate) enum Fallback<T> {
    /// The host's own (shared-memory) guard, its limit divided by the host count.
    Local {
        store: T,
        events: Option<Arc<dyn CallEvents>>,
    },
    Open(Option<Arc<dyn CallEvents>>),
    Closed(Option<Arc<dyn CallEvents>>),
}

impl<T> Fallback<T> {
    /// Counts the use and runs the behaviour's branch.
    pub(crate) fn decide<R>(
        &self,
        local: impl FnOnce(&T) -> R,
        open: impl FnOnce() -> R,
        closed: impl FnOnce() -> R,
    ) -> R {
        let events = match self {
            Fallback::Local { events, .. } | Fallback::Open(events) | Fallback::Closed(events) => {
                events
            }
        };
        if let Some(e) = events {
            e.backend_fallback();
        }
        match self {
            Fallback::Local { store, .. } => local(store),
            Fallback::Open(_) => open(),
            Fallback::Closed(_) => closed(),
        }
    }
}

/// The Redis backend of one client.
pub struct Redis {
    server: Arc<Server>,
    mode: OnBackendError,
    hosts: u32,
    /// The host's shared memory: the `local` behaviour's guards.
    local: Option<Arc<dyn Backend>>,
    events: Option<Arc<dyn CallEvents>>,
}

impl Redis {
    /// `local`: the host's shared-memory backend, required by `OnBackendError::Local`
    /// (without it `local` behaves as `closed`). `hosts` (at least 1) divides the local
    /// funnel's limit and the local budget's floor.
    pub fn new(
        server: Arc<Server>,
        mode: OnBackendError,
        hosts: u32,
        local: Option<Arc<dyn Backend>>,
    ) -> Self {
        Self {
            server,
            mode,
            hosts: hosts.max(1),
            local,
            events: None,
        }
    }

    /// Counts every fallback in `events` (the name's metrics).
    pub fn with_events(mut self, events: Arc<dyn CallEvents>) -> Self {
        self.events = Some(events);
        self
    }

    fn fallback<T>(
        &self,
        make_local: impl FnOnce(&dyn Backend) -> Result<T, Error>,
    ) -> Result<Fallback<T>, Error> {
        let events = self.events.clone();
        Ok(match (self.mode, &self.local) {
            (OnBackendError::Local, Some(local)) => Fallback::Local {
                store: make_local(local.as_ref())?,
                events,
            },
            (OnBackendError::Open, _) => Fallback::Open(events),
            _ => Fallback::Closed(events),
        })
    }
}

/// `n / hosts`, at least `min`.
fn share(n: u32, hosts: u32, min: u32) -> u32 {
    (n / hosts).max(min)
}

impl Backend for Redis {
    fn funnel(
        &self,
        name: &str,
        config: FunnelConfig,
        background: bool,
    ) -> Result<Arc<dyn Guard>, Error> {
        resilient_core::validate::name("name", name)?;
        let fallback = self.fallback(|local| {
            let limit = share(config.limit(), self.hosts, 1);
            let reserve = share(config.reserve(), self.hosts, 0).min(limit - 1);
            local.funnel(
                name,
                FunnelConfig::new(limit, reserve, config.lease())?
                    .with_share(config.share() && reserve > 0)?,
                background,
            )
        })?;
        let target = self.server.target();
        // Background callers of a funnel with a reserve are kept in the background set even
        // without `share`: a funnel of the same name with `share` (configured apart, e.g. a
        // queue middleware and a client) must count them as background, not as web holders.
        let plain_background = background && !config.share() && config.reserve() > 0;
        let share = (config.share() || plain_background).then(|| Share {
            background_key: target.key(name, "funnel:background"),
            demand_key: target.key(name, "funnel:background-wanted"),
            background,
            part: if background {
                config.limit() - config.reserve()
            } else {
                config.reserve()
            },
            demand_ms: if config.share() {
                BACKGROUND_DEMAND_MS
            } else {
                0
            },
        });
        Ok(Arc::new(RedisFunnel {
            server: self.server.clone(),
            key: target.key(name, "funnel"),
            cap: if background && !config.share() {
                config.limit() - config.reserve()
            } else {
                config.limit()
            },
            lease_ms: config.lease_ms(),
            fallback,
            quiet_until_ms: 0.into(),
            quiet_ms: crate::funnel::FIRST_QUIET_MS.into(),
            share,
        }))
    }

    fn budget(&self, name: &str, config: BudgetConfig) -> Result<Arc<dyn RetryAllowance>, Error> {
        resilient_core::validate::name("name", name)?;
        let fallback = self.fallback(|local| {
            local.budget(
                name,
                BudgetConfig::new(
                    config.ratio(),
                    share(config.floor(), self.hosts, 0),
                    config.window(),
                )?,
            )
        })?;
        Ok(Arc::new(RedisBudget {
            server: self.server.clone(),
            // The window (and an odd window's bucket width) is part of a budget's identity, as
            // in shared memory; `sums`, the hash's layout (`scripts::BUDGET`), so that no hash
            // of another layout is read as this one's.
            key: self
                .server
                .target()
                .key(name, &format!("{}:sums", config.key().replace('/', ":"))),
            bucket_ms: config.bucket_ms(),
            window: config.window(),
            floor: config.floor(),
            ratio: config.ratio(),
            fallback,
            granted_without_redis: Default::default(),
            fell_back: Default::default(),
        }))
    }

    fn breaker(&self, name: &str, config: BreakerConfig) -> Result<Arc<dyn BreakerStore>, Error> {
        resilient_core::validate::name("name", name)?;
        let fallback = self.fallback(|local| local.breaker(name, config))?;
        Ok(Arc::new(RedisBreaker::new(
            self.server.clone(),
            // A breaker per bucket width, as in shared memory (`BreakerConfig::key`).
            self.server
                .target()
                .key(name, &config.key().replace('/', ":")),
            config,
            fallback,
        )))
    }
}
