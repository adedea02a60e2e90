//! Redis Cluster: what `MOVED` redirections taught this process (the node serving each key
//! redirected, one [`Server`] per node), and [`Route`], a key's operations sent to its node.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use super::{Pipelined, Server, Unreachable, RELEASE_WAIT};

/// What a Redis Cluster's redirections (`MOVED`) taught this process: a server per node they
/// named, and the node serving each key redirected.
#[derive(Default)]
pub(super) struct Redirects {
    /// By `host:port` as the redirection gave it.
    nodes: Mutex<HashMap<String, Arc<Server>>>,
    /// By key. (A name's keys share one slot, but each is learnt on its own first redirection:
    /// one round trip per key and process, with no slot arithmetic here.)
    routes: Mutex<HashMap<String, Arc<Server>>>,
    /// Whether `routes` holds anything: a server no cluster redirected pays one load per
    /// operation.
    any: AtomicBool,
}

/// The URL's server owns its [`Redirects`]; a node's server refers to them without owning
/// them (they own it).
pub(super) enum Link {
    Owner(Arc<Redirects>),
    Node(Weak<Redirects>),
}

impl Link {
    pub(super) fn get(&self) -> Option<Arc<Redirects>> {
        match self {
            Link::Owner(r) => Some(r.clone()),
            Link::Node(r) => r.upgrade(),
        }
    }

    /// The node a redirection named for `key`, if any.
    pub(super) fn node_for(&self, key: &str) -> Option<Arc<Server>> {
        match self {
            Link::Owner(r) => r.node_for(key),
            Link::Node(r) => r.upgrade()?.node_for(key),
        }
    }
}

impl Redirects {
    /// `key` is served by the node at `addr` (`host:port`; an empty host: `from`'s): that
    /// node's server from now on, made the first time, as `from` with another address; that
    /// server. None when `addr` cannot be connected to that way (malformed, or `from` is a unix
    /// socket).
    pub(super) fn learn(
        self: &Arc<Self>,
        from: &Server,
        key: &str,
        addr: &str,
    ) -> Option<Arc<Server>> {
        let (host, port) = addr.rsplit_once(':')?;
        let port = port.parse::<u16>().ok()?;
        let mut info = from.target.info.clone();
        info.addr = match info.addr {
            redis::ConnectionAddr::Tcp(h, _) => {
                redis::ConnectionAddr::Tcp(if host.is_empty() { h } else { host.into() }, port)
            }
            redis::ConnectionAddr::TcpTls {
                host: h,
                insecure,
                tls_params,
                ..
            } => redis::ConnectionAddr::TcpTls {
                host: if host.is_empty() { h } else { host.into() },
                port,
                insecure,
                tls_params,
            },
            _ => return None,
        };
        let addr = info.addr.to_string();
        let mut nodes = self.nodes.lock().unwrap_or_else(PoisonError::into_inner);
        let node = match nodes.get(&addr) {
            Some(node) => node.clone(),
            None => {
                let mut target = from.target.clone();
                target.info = info;
                let node =
                    Server::build(target, from.resolver, Link::Node(Arc::downgrade(self))).ok()?;
                let node = Arc::new(node);
                nodes.insert(addr, node.clone());
                node
            }
        };
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.insert(key.to_owned(), node.clone());
        self.any.store(true, Ordering::Relaxed);
        Some(node)
    }

    /// `key` is no longer sent to `node` (it failed): the next operation asks the URL's
    /// server again, whose `MOVED` names the node serving it now (another after a failover).
    fn forget(&self, key: &str, node: &Arc<Server>) {
        let mut routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        if routes.get(key).is_some_and(|n| Arc::ptr_eq(n, node)) {
            routes.remove(key);
        }
    }

    fn node_for(&self, key: &str) -> Option<Arc<Server>> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let routes = self.routes.lock().unwrap_or_else(PoisonError::into_inner);
        routes.get(key).cloned()
    }
}

/// The operations of one key, sent to the node that serves it ([`Server::route`]).
pub struct Route<'a> {
    pub(super) server: &'a Arc<Server>,
    pub(super) key: &'a str,
}

impl Route<'_> {
    /// [`Server::run`] on the key's node.
    pub fn run<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> Result<T, Unreachable> {
        self.exec(f, Duration::ZERO, false).0
    }

    /// [`Server::run_idempotent`] on the key's node, and the server of that node (where a
    /// funnel slot taken is given back).
    pub fn run_idempotent<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> (Result<T, Unreachable>, Arc<Server>) {
        self.exec(f, Duration::ZERO, true)
    }

    /// [`Server::run_after_attempt`] on the key's node.
    pub fn run_after_attempt<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> Result<T, Unreachable> {
        self.exec(f, RELEASE_WAIT, false).0
    }

    /// On the node known for the key; after a `MOVED`, once more on the node it named. A
    /// known node that cannot be reached is forgotten for the key: a node that died is never
    /// asked again, and the URL's server names the one that took its slots over.
    fn exec<T>(
        &self,
        mut f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
        floor: Duration,
        resend: bool,
    ) -> (Result<T, Unreachable>, Arc<Server>) {
        let node = || {
            self.server
                .redirects
                .node_for(self.key)
                .unwrap_or_else(|| self.server.clone())
        };
        let server = node();
        let result = server.exec(&mut f, floor, resend, false, Some(self.key));
        match result.as_ref().err() {
            Some(Unreachable::Moved) => {
                let server = node();
                let result = server.exec(&mut f, floor, resend, false, Some(self.key));
                (result, server)
            }
            Some(Unreachable::BackingOff | Unreachable::NotSent | Unreachable::Failed)
                if !Arc::ptr_eq(&server, self.server) =>
            {
                if let Some(r) = self.server.redirects.get() {
                    r.forget(self.key, &server);
                }
                (result, server)
            }
            _ => (result, server),
        }
    }
}
