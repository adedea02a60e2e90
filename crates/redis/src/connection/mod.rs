//! This process's one connection to a Redis server: opened on first use, opened again in a
//! forked child (keyed by pid, as the I/O runtime), every wait bounded, and, after a failure,
//! left alone for a short back-off so a dead Redis costs a request nothing but a branch.
//!
//! Timeouts: a connect and the command after it together wait at most `min(target timeout, half
//! of what is left of the calling request's deadline)` (`resilient_http::call_time_left`), so a slow
//! Redis never takes more than half of a request's remaining time. A command that timed out
//! leaves the connection out of step (its reply may still come), so it is dropped.
//!
//! The socket's timeouts bound each read, and one operation may read several replies (the
//! replies of a release or of an original's record read before a command's, SCRIPT LOAD and
//! EVALSHA again after NOSCRIPT). So once an operation has used a quarter of its wait, each
//! further read gets only what is left of it: a slow Redis answering reply by reply cannot stretch an operation much past its
//! wait: the read under way keeps the timeout it started with, so a reply that arrives in
//! pieces may take that long once more (about 1.35 × the wait measured in
//! tests/slow_replies.rs; the wait is at most half of what the call has left). A connect, its
//! handshake (TLS, AUTH or HELLO, the database's SELECT) included, runs on a thread of its own
//! and is waited for the whole wait at most, whatever the server does (`connect_thread.rs`).
//!
//! Back-off: after a failure no command is tried for 50 ms, doubling to at most 1 s while
//! failures go on; the first success resets it. A Redis that comes back is used again within
//! a second, without restarting anything.
//!
//! A connection dropped at the server's end while unused (idle `timeout`, a restart, a proxy)
//! is opened again rather than counted as a failure: checked with a PING after [`IDLE_CHECK`]
//! of idleness; when a command finds it dropped, no back-off, and an idempotent command (a
//! funnel admission, [`Server::run_idempotent`]), or one Redis did not read (found dropped
//! before its reply was due, see [`Pipelined`]), is sent again on a new connection.
//!
//! Redis Cluster: a guard's commands go through [`Server::route`] with its key. A node that
//! does not serve the key's slot answers `MOVED slot host:port`; the operation is sent again
//! at once to that node, which this process then uses for that key (one more connection per
//! node, each as the URL's: same credentials, TLS, timeouts, back-off of its own). A redirection
//! is no failure: no back-off, nothing reported. The operation sent again gets half of what is
//! left then, so the two take at most three quarters of the call's remaining time. A node that
//! cannot be reached is forgotten for the key (the URL's server is asked again, and names the
//! node that took the slot over after a failover); a release answered `MOVED` (its slot
//! resharded while held) follows its key (`leftovers.rs`). `ASK` (a slot being migrated) is not
//! followed: that key's calls fall back while the migration lasts.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use crate::connect_thread::ConnectThread;
use crate::lookup::{self, Lookup, Resolver};
use crate::target::Target;

mod cluster;
mod pipelined;

use cluster::Link;
pub use cluster::Route;
pub(crate) use pipelined::lost;
pub use pipelined::{evalsha, Pipelined};
use pipelined::{fit, interrupted, leaves_out_of_step, ran_nothing, Pending};

/// The first back-off after a failure.
pub const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest back-off.
pub const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// The least wait a release gets, even past the call's deadline: a slot given back late is
/// better than one held until its lease ends. Usually it takes one write (microseconds).
pub const RELEASE_WAIT: Duration = Duration::from_millis(10);
/// A connection unused this long is checked with a PING before a command is written to it.
/// A server closes a connection left idle past its `timeout` (1 s at the least), and a restart
/// or a proxy may drop one meanwhile; a command written to a dropped connection may fail
/// after Redis ran it (only a funnel admission, idempotent by token, may be sent again: a
/// budget or breaker decision would count twice), while a PING that finds it dropped costs
/// nothing but a new connection in the same wait. Busy processes never pay the PING.
const IDLE_CHECK: Duration = Duration::from_secs(1);
/// Under this much time there is no point asking.
const MIN_WAIT: Duration = Duration::from_millis(1);
/// Redis gets at least this long (or its timeout, if shorter), even when the guards' share of
/// the call is smaller, as at the end of a funnel wait that ran into the deadline: it comes out
/// of the attempt's least useful time (50 ms unless the attempt's timeout is shorter), and a
/// healthy Redis answers well within it, on a busy host too (1 ms was not: a reply that took
/// longer started the back-off). Not asking then applied `on_backend_error` with Redis up: a
/// call let through a full funnel under 'open', one refused as `CircuitOpen` under 'closed'
/// with the breaker closed.
const LEAST_WAIT: Duration = Duration::from_millis(10);

/// Why Redis gave no answer (the guards then use their `on_backend_error` behaviour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unreachable {
    /// In back-off after a recent failure: not tried.
    BackingOff,
    /// This key's commands are in a back-off of their own (Redis answered WRONGTYPE under it):
    /// not tried. The server, and a cluster node known for the key, are fine.
    KeyBackingOff,
    /// Connecting (or checking an idle connection) failed or timed out: the command was not
    /// sent.
    NotSent,
    /// The command failed or timed out: Redis may have run it, or may run it still.
    Failed,
    /// Redis answered with an error it gives before running a command (READONLY, NOPERM, OOM,
    /// BUSY, LOADING, ASK...): it ran nothing that holds a slot.
    Refused,
    /// A cluster node answered `MOVED`: it ran nothing, and the key's node is now known
    /// ([`Route`] sends the operation there).
    Moved,
}

thread_local! {
    /// Why this thread's last operation on Redis got no answer ([`Server::exec`]): for the
    /// message of a call a guard refused then (`on_backend_error` 'closed'), read in the same
    /// admission.
    static WHY_UNREACHABLE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Why this thread's last operation on Redis got no answer (`Redis: connection refused`;
/// `Redis: no answer in time; asked again in 40 ms`), what a guard's `why_down` tells. Never
/// the URL.
pub(crate) fn why_unreachable() -> Option<String> {
    WHY_UNREACHABLE.with(|why| why.borrow().as_ref().map(|why| format!("Redis: {why}")))
}

struct Slot {
    pid: u32,
    conn: Option<redis::Connection>,
    /// The read/write timeout set on `conn` now.
    timeout: Option<Duration>,
    retry_at: Option<Instant>,
    backoff: Duration,
    /// What was sent on `conn` without waiting for its reply.
    pending: Pending,
    /// The end of the last operation that succeeded on `conn` (see [`IDLE_CHECK`]).
    used_at: Option<Instant>,
    /// The host name's lookup (`lookup.rs`).
    lookup: Lookup,
    /// Keys whose commands Redis refused for the key itself (WRONGTYPE: something else holds
    /// a key of ours): their own back-off (until when, and the next length), so that the
    /// server's other names keep going to Redis. At most [`MAX_KEYS_BACKING_OFF`]: past that,
    /// the server backs off as a whole.
    key_backoff: HashMap<String, (Instant, Duration)>,
    /// What the last failure was (`report::describe`), for the message of a call refused
    /// because of it or in the back-off it started.
    failure: Option<String>,
}

/// Keys in back-off of their own at most (those whose back-off ended are dropped first).
const MAX_KEYS_BACKING_OFF: usize = 1024;

/// A Redis server and this process's connection to it.
pub struct Server {
    target: Target,
    client: redis::Client,
    /// How host names are looked up (the system's resolver but in tests).
    resolver: Resolver,
    slot: Mutex<Slot>,
    /// The cluster nodes a redirection named, shared by the URL's server and those nodes'.
    redirects: Link,
    /// Where this server's connects run, each bounded by its wait (`connect_thread.rs`).
    connects: ConnectThread,
    /// When the last operation began that Redis answered (monotonic ms; 0: never).
    answered_ms: AtomicU64,
}

/// Servers kept for URLs nothing uses now (no client's backend, no slot to give back): a
/// process that meets many URLs (a key prefix per tenant) keeps the connections of the most
/// recently used ones, not one per URL ever used, each a file descriptor here and one of
/// Redis's `maxclients` in every worker of every host.
pub const MAX_IDLE_SERVERS: usize = 32;

impl Server {
    /// The process-wide server for `url` (one connection per URL and process). Past
    /// [`MAX_IDLE_SERVERS`] URLs, the least recently asked for of those nothing uses are let go
    /// (their releases and replies settled first) and their connections closed.
    pub fn shared(url: &str) -> Result<Arc<Server>, resilient_http::ConfigError> {
        /// Each URL's server and when it was last asked for (a count of calls).
        type Servers = HashMap<String, (Arc<Server>, u64)>;
        static SERVERS: OnceLock<Mutex<(Servers, u64)>> = OnceLock::new();
        let mut guard = SERVERS
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let (servers, tick) = &mut *guard;
        *tick += 1;
        if let Some((s, used)) = servers.get_mut(url) {
            *used = *tick;
            return Ok(s.clone());
        }
        let server = Arc::new(Server::new(Target::parse(url)?)?);
        servers.insert(url.to_owned(), (server.clone(), *tick));
        let mut gone = Vec::new();
        while servers.len() > MAX_IDLE_SERVERS {
            // Nothing but this map holds it: no backend in use, no slot still to give back.
            let idle = servers
                .iter()
                .filter(|(_, (s, _))| Arc::strong_count(s) == 1)
                .min_by_key(|(_, (_, used))| *used)
                .map(|(url, _)| url.clone());
            match idle.and_then(|url| servers.remove(&url)) {
                Some((s, _)) => gone.push(s),
                None => break,
            }
        }
        // Still over: the least recently asked for are held by something. A release's entry
        // holds its server until the reply to its ZREM, written without waiting, is read with
        // the next command on that URL, which never comes when each URL is used once (a queue
        // worker's tenants): those replies are read now, and the next new URL lets it go.
        let mut by_age: Vec<_> = servers.values().collect();
        by_age.sort_by_key(|(_, used)| *used);
        let excess = servers.len().saturating_sub(MAX_IDLE_SERVERS);
        let unsettled: Vec<Arc<Server>> = by_age
            .into_iter()
            .take(excess)
            .map(|(s, _)| s.clone())
            .collect();
        drop(guard);
        // Replies still unread (an original's record) are read before the socket closes:
        // closed with data unread, it would be reset. (Nothing else to settle: a slot to give
        // back holds its server. Nor a connection opened just to be closed.)
        for s in gone
            .iter()
            .chain(&unsettled)
            .filter(|s| s.has_unread_replies())
        {
            let _ = s.settle_releases();
        }
        Ok(server)
    }

    /// This process's connection has replies it has not read yet.
    fn has_unread_replies(&self) -> bool {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        slot.pid == resilient_core::current_pid()
            && slot.conn.is_some()
            && !slot.pending.unread.is_empty()
    }

    pub fn new(target: Target) -> Result<Server, resilient_http::ConfigError> {
        Server::with_resolver(target, lookup::system)
    }

    /// [`Server::new`] with host names looked up by `resolver` (tests: a slow resolver).
    pub fn with_resolver(
        target: Target,
        resolver: Resolver,
    ) -> Result<Server, resilient_http::ConfigError> {
        Server::build(target, resolver, Link::Owner(Default::default()))
    }

    fn build(
        target: Target,
        resolver: Resolver,
        redirects: Link,
    ) -> Result<Server, resilient_http::ConfigError> {
        let client = match &target.ca {
            None => redis::Client::open(target.info.clone()),
            Some(pem) => redis::Client::build_with_tls(
                target.info.clone(),
                redis::TlsCertificates {
                    client_tls: None,
                    root_cert: Some(pem.clone()),
                },
            ),
        }
        .map_err(|_| {
            resilient_http::ConfigError::new(
                "backend",
                "is not a usable Redis URL (or its 'ca' file holds no usable certificate)",
            )
        })?;
        Ok(Server {
            target,
            client,
            resolver,
            slot: Mutex::new(Slot::new(0, resolver)),
            redirects,
            connects: ConnectThread::default(),
            answered_ms: AtomicU64::new(0),
        })
    }

    /// When the last operation began that the server answered (monotonic ms, 0: never): a
    /// script this process wrote before then has run by now (`leftovers.rs`: a late admission,
    /// its connection dropped unanswered during a stall, is run when Redis is back, before
    /// the commands of connections opened after it in practice).
    pub(crate) fn answered_ms(&self) -> u64 {
        self.answered_ms.load(Ordering::Relaxed)
    }

    pub fn target(&self) -> &Target {
        &self.target
    }

    /// The operations of `key`: on this server, or on the cluster node a `MOVED` named for
    /// it.
    pub fn route<'a>(self: &'a Arc<Server>, key: &'a str) -> Route<'a> {
        Route { server: self, key }
    }

    /// The longest wait for one connect or command now; `floor`: at least this (a release).
    fn wait(&self, floor: Duration) -> Duration {
        let wait = match resilient_http::call_time_left() {
            Some(left) => self.target.timeout.min(left / 2),
            None => self.target.timeout,
        };
        wait.max(floor.min(self.target.timeout))
    }

    /// Runs `f` on this process's connection, one round trip at most (a script not loaded yet
    /// takes a second and third: SCRIPT LOAD, EVALSHA again). Sent again on a new connection
    /// only when the connection is found dropped before Redis could have read `f`'s command
    /// (its write failed, or a reply ahead of it, of a command sent without waiting, never
    /// came), see [`Pipelined`].
    pub fn run<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> Result<T, Unreachable> {
        self.exec(f, Duration::ZERO, false, false, None)
    }

    /// [`Server::run`] for an `f` that Redis may run twice with the same effect (a funnel
    /// admission, by its token): when a connection used before is found dropped (EOF, reset,
    /// broken pipe: Redis may or may not have run `f`), `f` is sent again on a new connection
    /// within the same wait instead of falling back. The replies unread on the dropped
    /// connection (releases) are lost with it; those releases are sent again first.
    pub fn run_idempotent<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> Result<T, Unreachable> {
        self.exec(f, Duration::ZERO, true, false, None)
    }

    /// [`Server::run`] for what follows an attempt (recording its outcome): tried even when the
    /// call has no time left (an attempt that ran to its deadline is the failure a breaker must
    /// count), waiting at most [`RELEASE_WAIT`] then.
    pub fn run_after_attempt<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
    ) -> Result<T, Unreachable> {
        self.exec(f, RELEASE_WAIT, false, false, None)
    }

    /// Runs `f` with every wait bounded as [`Server::wait`] says, never under `floor`; with
    /// `resend`, as [`Server::run_idempotent`] says. `releasing`: `f` only gives slots back,
    /// which goes through a back-off on a connection that is open (an error Redis answered to
    /// another command says nothing against a ZREM, which Redis runs even out of memory).
    /// `key`: the key `f` works on, whose node a `MOVED` answer names (see [`Route`]).
    fn exec<T>(
        &self,
        f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
        floor: Duration,
        resend: bool,
        releasing: bool,
        key: Option<&str>,
    ) -> Result<T, Unreachable> {
        let result = self.operate(f, floor, resend, releasing, key);
        if let Err(unreachable) = result.as_ref() {
            let why = self.explain(*unreachable, key);
            WHY_UNREACHABLE.with(|w| *w.borrow_mut() = Some(why));
        }
        result
    }

    /// Why an operation on `key` got no answer: the failure, and when Redis is asked again if
    /// it is in a back-off now.
    fn explain(&self, unreachable: Unreachable, key: Option<&str>) -> String {
        let slot = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let (why, until) = match unreachable {
            // (Sent on to the node named: a failure only if that one redirects again.)
            Unreachable::Moved => (Some("a cluster node redirected (MOVED) twice"), None),
            Unreachable::KeyBackingOff => (
                Some("answered WRONGTYPE for this name's key (another kind of value holds it)"),
                key.and_then(|k| slot.key_backoff.get(k)).map(|&(at, _)| at),
            ),
            _ => (slot.failure.as_deref(), slot.retry_at),
        };
        let why = why.unwrap_or("no answer");
        match until.and_then(|at| at.checked_duration_since(Instant::now())) {
            Some(left) if !left.is_zero() => {
                format!("{why}; asked again in {} ms", left.as_millis().max(1))
            }
            _ => why.to_owned(),
        }
    }

    /// [`Server::exec`]'s work.
    fn operate<T>(
        &self,
        mut f: impl FnMut(&mut Pipelined<'_>) -> redis::RedisResult<T>,
        floor: Duration,
        resend: bool,
        releasing: bool,
        key: Option<&str>,
    ) -> Result<T, Unreachable> {
        let wait = self.wait(floor).max(LEAST_WAIT.min(self.target.timeout));
        // One budget for connecting, reading replies left unread and the command together.
        let started = Instant::now();
        let started_ms = resilient_core::clock::monotonic_ms();
        let left = || wait.saturating_sub(started.elapsed());
        let mut guard = self.slot.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = &mut *guard;
        let pid = resilient_core::current_pid();
        if slot.pid != pid {
            // Inherited across fork: the parent's socket, never ours to use or to close.
            if let Some(inherited) = slot.conn.take() {
                std::mem::forget(inherited);
            }
            slot.lookup.leave_inherited();
            *slot = Slot::new(pid, self.resolver);
        }
        // After a failure (no connection, no answer in time, or an error Redis answered:
        // OOM, BUSY, READONLY), nothing is sent until the back-off ends: a struggling Redis is
        // not asked again by every admission of every worker. WRONGTYPE under one of our keys
        // holds back that key's commands alone.
        if slot.retry_at.is_some_and(|at| Instant::now() < at)
            && !(releasing && slot.conn.is_some())
        {
            return Err(Unreachable::BackingOff);
        }
        if slot.key_backing_off(key) {
            return Err(Unreachable::KeyBackingOff);
        }
        // From here on Redis is talked to, signals held off: a read with a timeout
        // (`SO_RCVTIMEO`, which bounds every Redis read) fails with `EINTR` once a handler ran,
        // whatever `SA_RESTART` says, and a reply cut short drops the connection (a queue
        // worker's `pcntl_async_signals`). Held for one operation, bounded by its wait, a signal
        // is delivered when it ends, and PHP runs its handler then.
        let _signals = resilient_core::signals::HeldOff::new();
        if slot.used_at.is_some_and(|at| at.elapsed() >= IDLE_CHECK) {
            if let Err(e) = slot.check(started, wait) {
                slot.drop_connection(self);
                // Found dropped, or the check cut short by a stop of the process (see below):
                // the command goes out on a new connection.
                if !e.is_connection_dropped() && !interrupted(&e) {
                    // No answer in time: as any command's failure.
                    slot.note_failure(&e);
                    slot.failed();
                    return Err(Unreachable::NotSent);
                }
            }
        }
        // Sent again once at most, on a new connection (`resend`).
        let mut resent = false;
        let outcome = loop {
            let connecting = slot.conn.is_none();
            if connecting {
                // (The back-off was checked above; sending again after a drop is no back-off
                // case.)
                // The connect and its handshake (TLS, AUTH or HELLO, SELECT, a PING that makes a
                // TLS handshake without AUTH) within this wait, on the connect thread.
                match self.connect(&mut slot.lookup, &left) {
                    Ok(conn) => {
                        slot.conn = Some(conn);
                        slot.timeout = None;
                        slot.pending = Pending::default();
                        slot.used_at = None;
                    }
                    Err(e) => {
                        slot.note_failure(&e);
                        // A handshake a stop of the process cut short says nothing of Redis:
                        // this operation falls back, the next one connects again at once.
                        if !interrupted(&e) {
                            slot.failed();
                        }
                        return Err(if resent {
                            Unreachable::Failed
                        } else {
                            Unreachable::NotSent
                        });
                    }
                }
            }
            let Some(conn) = slot.conn.as_mut() else {
                return Err(Unreachable::Failed);
            };
            // Connected already: the whole wait; after connecting, what the connect left.
            let first = if connecting { left() } else { wait };
            let mut unread_by_redis = false;
            let result = fit(conn, &mut slot.timeout, first).and_then(|()| {
                let mut c = Pipelined {
                    conn,
                    key,
                    pending: &mut slot.pending,
                    timeout: &mut slot.timeout,
                    started,
                    wait,
                    unread_by_redis: &mut unread_by_redis,
                };
                // Slots to give back first (releases not sent yet, admissions never
                // answered): one more write, read with this operation's replies.
                if let Some((packed, ids)) = crate::leftovers::take_to_send(self) {
                    c.send_releases(&packed, &ids)?;
                }
                f(&mut c)
            });
            match result {
                Ok(v) => {
                    // A release that went through says nothing of the command a back-off is
                    // for (it passes a back-off, above): only other commands end it. Nor does
                    // an operation whose releases were refused (below).
                    if !releasing && slot.pending.release_refused_for_good.is_none() {
                        slot.retry_at = None;
                        slot.backoff = FIRST_BACKOFF;
                    }
                    // Only a reply read ends a key's back-off: a script sent without waiting
                    // (an original's record) says nothing yet.
                    if let Some(key) =
                        key.filter(|_| slot.pending.answered && !slot.key_backoff.is_empty())
                    {
                        slot.key_backoff.remove(key);
                    }
                    slot.used_at = Some(Instant::now());
                    break Ok(v);
                }
                Err(e) if e.kind() == redis::ErrorKind::Moved => {
                    // The key is served by another node: no failure of this server's.
                    slot.used_at = Some(Instant::now());
                    let learnt = match (key, e.redirect_node(), self.redirects.get()) {
                        (Some(key), Some((addr, _)), Some(r)) => r.learn(self, key, addr).is_some(),
                        _ => false,
                    };
                    if !learnt {
                        slot.note_failure(&e);
                    }
                    break Err(if learnt {
                        Unreachable::Moved
                    } else {
                        Unreachable::Refused
                    });
                }
                Err(e) if e.kind() == redis::ErrorKind::Ask => {
                    // A slot being migrated: this key's calls fall back meanwhile; the server
                    // is fine.
                    slot.note_failure(&e);
                    slot.used_at = Some(Instant::now());
                    break Err(Unreachable::Refused);
                }
                Err(e) => {
                    slot.note_failure(&e);
                    if leaves_out_of_step(&e) {
                        slot.drop_connection(self);
                    }
                    // A connection used before and found dropped (EOF, reset, broken pipe)
                    // lost its server's end while unused, the server being alive to close it:
                    // no back-off. So is a read or write cut short by a stop of this process
                    // (SIGSTOP and SIGCONT, a container paused: a socket with a timeout is not
                    // restarted, whatever the signal mask), which says nothing of Redis; the
                    // connection, out of step, was dropped above. An idempotent `f` is sent
                    // again at once on a new connection, and so is any `f` whose command Redis
                    // did not read (found dropped before its reply was due); any other falls
                    // back (Redis may have run it before the drop), and the next command
                    // connects again (a failed connect starts the back-off).
                    let dropped = (!connecting && e.is_connection_dropped()) || interrupted(&e);
                    if dropped && (resend || unread_by_redis) && !resent && left() >= MIN_WAIT {
                        resent = true;
                        continue;
                    }
                    match key {
                        // About this key only: the server answered, and its other names
                        // go on (a back-off of the key's own keeps it from being asked
                        // at every admission).
                        Some(key) if !dropped && e.code() == Some("WRONGTYPE") => {
                            slot.key_failed(key)
                        }
                        _ if !dropped => slot.failed(),
                        _ => {}
                    }
                    break Err(if ran_nothing(&e) {
                        Unreachable::Refused
                    } else {
                        Unreachable::Failed
                    });
                }
            }
        };
        for (id, to) in std::mem::take(&mut slot.pending.moved) {
            let learnt =
                crate::leftovers::moved(id, |key| self.redirects.get()?.learn(self, key, &to));
            slot.pending.refused |= !learnt;
        }
        for (key, to) in std::mem::take(&mut slot.pending.moved_keys) {
            let learnt = self
                .redirects
                .get()
                .and_then(|r| r.learn(self, &key, &to))
                .is_some();
            // Not learnt: as any other refusal, the next ones are waited for.
            slot.pending.scripts_refused |= !learnt;
        }
        if std::mem::take(&mut slot.pending.answered) {
            self.answered_ms.fetch_max(started_ms, Ordering::Relaxed);
        }
        if slot.conn.is_some() && slot.pending.unread.is_empty() {
            if std::mem::take(&mut slot.pending.refused) {
                crate::leftovers::send_again(self);
            } else {
                crate::leftovers::answered(self);
            }
        }
        // A release Redis refuses for good (an ACL without ZREM, a replica's READONLY) frees no
        // slot: admitted on, the funnel would fill with slots nothing frees until their leases
        // end, and then refuse every call as full. So the operation counts as failed: its
        // outcome follows on_backend_error (an admission it made is given back as one that got
        // no answer is, once Redis takes releases again), and the back-off grows, Redis asked
        // again as it ends. (Its own command failing has started the back-off already.)
        let refused = slot.pending.release_refused_for_good.take();
        if let (Some(why), true) = (refused, outcome.is_ok()) {
            slot.failure = Some(format!("a slot given back was refused: {why}"));
            slot.failed();
            if !releasing {
                return Err(Unreachable::Failed);
            }
        }
        outcome
    }
}

impl Server {
    /// Opens a connection within `left()`, the host name's lookup included (`lookup.rs`). A
    /// `redis://` host name is connected to by the addresses it was looked up to, one after the
    /// other while time is left; one that did not answer goes last for the next connect (an
    /// IPv6 route that drops packets would otherwise take every connect's wait), and a refusal
    /// has the name looked up again (the host may have moved). TLS needs the name itself (the
    /// certificate is checked against it), so for `rediss://` a fresh lookup first shows, within
    /// the wait, that the resolver answers; the redis crate's connect then looks the name up
    /// once more. Each connect, its handshake and the URL's database included, runs on the
    /// connect thread, bounded by what is left of the wait (`connect_thread.rs`).
    fn connect(
        &self,
        lookup: &mut Lookup,
        left: &impl Fn() -> Duration,
    ) -> redis::RedisResult<redis::Connection> {
        let no_time = || {
            redis::RedisError::from(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "no time left to connect",
            ))
        };
        let (host, port, tls) = match &self.target.info.addr {
            redis::ConnectionAddr::Tcp(host, port) => (host, *port, false),
            redis::ConnectionAddr::TcpTls { host, port, .. } => (host, *port, true),
            redis::ConnectionAddr::Unix(_) => return self.dial(self.client.clone(), left()),
        };
        if host.parse::<std::net::IpAddr>().is_ok() {
            return self.dial(self.client.clone(), left());
        }
        let addrs = lookup.addresses(host, port, left(), tls)?;
        if tls {
            if left() < MIN_WAIT {
                return Err(no_time());
            }
            return self.dial(self.client.clone(), left());
        }
        let mut last = None;
        let mut refused = false;
        for addr in addrs {
            let wait = left();
            if wait < MIN_WAIT {
                break;
            }
            let mut info = self.target.info.clone();
            info.addr = redis::ConnectionAddr::Tcp(lookup::numeric_host(&addr), addr.port());
            match redis::Client::open(info).and_then(|c| self.dial(c, wait)) {
                Ok(conn) => return Ok(conn),
                // The address did not answer, or refused: the others first next time.
                Err(e) if e.kind() == redis::ErrorKind::IoError => {
                    lookup.demote(addr);
                    refused |= !e.is_timeout();
                    last = Some(e);
                }
                // Redis answered (a wrong password...): not the address's fault.
                Err(e) => return Err(e),
            }
        }
        if refused {
            lookup.forget();
        }
        Err(last.unwrap_or_else(no_time))
    }

    /// Connects with `client` on the connect thread, waiting `wait` at most, and selects the
    /// URL's database: redis-rs sends SELECT in the handshake's pipeline (after AUTH or HELLO)
    /// and reads each reply with the whole timeout, so it is sent here, after the handshake,
    /// within what the handshake left. A TLS connection makes its handshake at its first
    /// command, so without AUTH one is sent here too (SELECT, or PING for the database 0): the
    /// first admission would otherwise make it, outside the connect thread's bound.
    fn dial(&self, client: redis::Client, wait: Duration) -> redis::RedisResult<redis::Connection> {
        let db = self.target.db;
        let info = client.get_connection_info();
        let tls = matches!(info.addr, redis::ConnectionAddr::TcpTls { .. })
            && info.redis.password.is_none()
            && info.redis.username.is_none();
        self.connects.run(wait, move || {
            let started = Instant::now();
            let mut conn = client.get_connection_with_timeout(wait)?;
            if db != 0 || tls {
                fit(&mut conn, &mut None, wait.saturating_sub(started.elapsed()))?;
            }
            if db != 0 {
                redis::cmd("SELECT").arg(db).query::<()>(&mut conn)?;
            } else if tls {
                // Any answer shows the handshake made (an ACL may refuse PING itself).
                match redis::cmd("PING").query::<redis::Value>(&mut conn) {
                    Err(e) if e.code().is_none() => return Err(e),
                    _ => {}
                }
            }
            Ok(conn)
        })
    }

    /// Sends `cmd` without waiting for its reply (read, and dropped, before the next command
    /// on this connection): for a release, which is done once Redis has it, and whose answer
    /// changes nothing. Nothing is sent when Redis is unreachable.
    pub fn send(&self, cmd: &redis::Cmd) -> Result<(), Unreachable> {
        // Tried even when the call has no time left (it ended at its deadline): one write,
        // bounded by RELEASE_WAIT.
        self.exec(
            |c| c.send(&cmd.get_packed_command(), 1),
            RELEASE_WAIT,
            false,
            true,
            None,
        )
    }

    /// Writes the ZREMs of the funnel slots to give back (`leftovers.rs`) without waiting for
    /// their replies, as [`Server::send`]; they stay to be sent with a later command when
    /// Redis is unreachable now.
    pub(crate) fn send_releases(&self) -> Result<(), Unreachable> {
        self.exec(|_| Ok(()), RELEASE_WAIT, false, true, None)
    }

    /// [`Server::send_releases`], then reads every reply still unread on the connection
    /// (request end: no later command would). A connection found dropped (a release written
    /// into it never reached Redis) is opened again and the ZREMs sent on it; a ZREM Redis
    /// refused stays to be sent with a later command.
    pub(crate) fn settle_releases(&self) -> Result<(), Unreachable> {
        self.exec(|c| c.drain(), RELEASE_WAIT, true, true, None)
    }

    /// [`Server::settle_releases`] at the process's end, past a back-off (the next command
    /// that would have carried the releases never comes): one connect and one write at most,
    /// within the same wait.
    pub(crate) fn settle_releases_at_exit(&self) -> Result<(), Unreachable> {
        self.slot
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retry_at = None;
        self.settle_releases()
    }
}

impl Slot {
    fn new(pid: u32, resolver: Resolver) -> Slot {
        Slot {
            pid,
            conn: None,
            timeout: None,
            retry_at: None,
            backoff: FIRST_BACKOFF,
            pending: Pending::default(),
            used_at: None,
            lookup: Lookup::new(resolver),
            key_backoff: HashMap::new(),
            failure: None,
        }
    }

    /// PING on the connection (and the replies left unread read before its own), within the
    /// operation's wait.
    fn check(&mut self, started: Instant, wait: Duration) -> redis::RedisResult<()> {
        let Some(conn) = self.conn.as_mut() else {
            return Ok(());
        };
        fit(conn, &mut self.timeout, wait)?;
        redis::cmd("PING").query::<()>(&mut Pipelined {
            conn,
            key: None,
            pending: &mut self.pending,
            timeout: &mut self.timeout,
            started,
            wait,
            // A drop found here has the connection opened again before any command.
            unread_by_redis: &mut false,
        })
    }

    /// Drops the connection: the releases written on it may never have reached Redis, so
    /// they are sent again, and what its replies said is forgotten with it.
    fn drop_connection(&mut self, server: &Server) {
        self.conn = None;
        self.pending = Pending::default();
        crate::leftovers::send_again(server);
    }

    /// Reports `e` (`report.rs`) and keeps what it was, for the message of a call it leaves
    /// refused.
    fn note_failure(&mut self, e: &redis::RedisError) {
        crate::report::failure(e);
        self.failure = Some(crate::report::describe(e));
    }

    fn failed(&mut self) {
        self.retry_at = Some(Instant::now() + self.backoff);
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }

    /// Redis refused a command for `key` itself: that key's back-off starts or doubles, as
    /// the server's would, and the server's other names are not held back. With no room left
    /// for the key, the server backs off instead (never no back-off at all).
    fn key_failed(&mut self, key: &str) {
        let now = Instant::now();
        let backoff = self.key_backoff.get(key).map_or(FIRST_BACKOFF, |&(_, b)| b);
        if self.key_backoff.len() >= MAX_KEYS_BACKING_OFF && !self.key_backoff.contains_key(key) {
            self.key_backoff.retain(|_, &mut (at, _)| at > now);
        }
        if self.key_backoff.len() < MAX_KEYS_BACKING_OFF || self.key_backoff.contains_key(key) {
            self.key_backoff.insert(
                key.to_owned(),
                (now + backoff, (backoff * 2).min(MAX_BACKOFF)),
            );
        } else {
            self.failed();
        }
    }

    /// Whether `key` is in a back-off of its own now.
    fn key_backing_off(&self, key: Option<&str>) -> bool {
        !self.key_backoff.is_empty()
            && key
                .and_then(|k| self.key_backoff.get(k))
                .is_some_and(|&(at, _)| Instant::now() < at)
    }
}
