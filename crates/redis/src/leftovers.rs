//! Funnel slots this process may hold on Redis, each kept here until Redis has the ZREM that
//! gives it back. A slot is
//! - held: a permit holds it. Given back at request end when a bailout (fatal error,
//!   `max_execution_time`) long-jumped past the frames that would have dropped the permit;
//!   without this it would stay held until its lease ends (twice the timeout by default);
//! - to release: its release could not be sent (the connection was backing off, or the request
//!   had no time left), or its admission got no answer after the script may have been written
//!   (a timeout during a stall: Redis runs the script once it is back, and the token then holds
//!   a slot for a whole lease with nobody to give it back);
//! - sent: its ZREM was written on the connection, the reply not read yet. Forgotten once the
//!   reply is read; to release again if the connection is dropped first (the write may never
//!   have reached Redis).
//!
//! Every operation on a usable connection first writes the ZREMs of its server's slots to
//! release, read with its own reply (`connection/pipelined.rs`), and request end writes them for every
//! slot still here. A ZREM of a token Redis never added, or removed already, changes nothing;
//! tokens are never reused. A late admission's ZREM rides on a connection opened after the one
//! that sent its script, and Redis reads the earlier connection's bytes first in practice (they
//! were waiting when the stall ended); should the ZREM ever come first, the lease still ends.
//!
//! Entries of another pid (inherited across fork) are dropped, never released: the parent's
//! slots are the parent's. A release Redis refused with an error, or could not be sent, is sent
//! again until the slot's lease has ended, then dropped: Redis no longer counts the slot (the
//! next admission at the cap removes it), and a ZREM Redis keeps refusing (a server that became
//! a replica, an ACL that lost the key) or a server that is gone (a cluster node replaced at
//! another address) would otherwise have every command, and every request end, of the process
//! try it for as long as it lives. (The end is reckoned from when the admission was sent, by
//! this host's clock: Redis starts the lease when it runs the admission, a round trip later at
//! most for an admission it answered.) An admission that got no answer is kept past that end
//! until its server has answered this process since it was sent (Redis runs the script when it
//! is back, and starts the lease then), at most [`LATE_KEEP`]: a stall longer than the lease
//! would otherwise leave the slot held for a lease after it whenever no command could be
//! written during it (a connect whose handshake, AUTH or SELECT, timed out). Against a server
//! that is gone, such an entry is tried (at request end, once per back-off) for those 60 s
//! more.
//!
//! Redis Cluster: a release answered `MOVED` (the slot was resharded while it was held, its key
//! moved with it) goes to the node named, which this process then uses for the key.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use crate::connection::Server;

/// How long past its lease an admission Redis never answered is kept while its server gives
/// this process no answer: an admission Redis runs more than this late holds its slot for its
/// lease. (Bounds the entries a long stall piles up: one per back-off at most.)
const LATE_KEEP: Duration = Duration::from_secs(60);

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Held,
    ToRelease,
    Sent,
}

struct Slot {
    /// Names the entry in a reply's place ([`take_to_send`], [`moved`]).
    id: u64,
    pid: u32,
    server: Arc<Server>,
    key: String,
    /// The background holders' set of a funnel with `share`.
    background_key: Option<String>,
    token: String,
    state: State,
    /// When the admission was sent plus the lease: a release not done by then is dropped.
    until: Instant,
    /// An admission that got no answer: when it was sent (monotonic ms), to keep it past
    /// `until` while its server has not answered since ([`Slot::may_run_later`]).
    unanswered_at_ms: Option<u64>,
}

impl Slot {
    /// An admission Redis may not have run yet: no reply came from its server since it was
    /// sent (within [`LATE_KEEP`] past its lease).
    fn may_run_later(&self, now: Instant) -> bool {
        self.unanswered_at_ms.is_some_and(|sent_ms| {
            self.server.answered_ms() <= sent_ms && now < self.until + LATE_KEEP
        })
    }
}

static SLOTS: Mutex<Vec<Slot>> = Mutex::new(Vec::new());

/// How many entries are not `Held`: every command checks for ZREMs to send, and takes the lock
/// only when there may be some (or replies to settle).
static UNSETTLED: AtomicUsize = AtomicUsize::new(0);

fn slots() -> MutexGuard<'static, Vec<Slot>> {
    SLOTS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A slot asked for of `server` under `key`: its token, and the lease it was asked with.
pub(crate) struct Asked<'a> {
    pub server: &'a Arc<Server>,
    pub key: &'a str,
    pub background_key: Option<&'a str>,
    pub token: &'a str,
    /// When the admission was sent, and its lease.
    pub sent: Instant,
    pub lease: Duration,
}

fn push(asked: &Asked<'_>, state: State, unanswered_at_ms: Option<u64>) {
    let Asked {
        server,
        key,
        background_key,
        token,
        ..
    } = *asked;
    static IDS: AtomicU64 = AtomicU64::new(0);
    let mut slots = slots();
    slots.push(Slot {
        id: IDS.fetch_add(1, Ordering::Relaxed),
        pid: resilient_core::current_pid(),
        server: server.clone(),
        key: key.to_owned(),
        background_key: background_key.map(str::to_owned),
        token: token.to_owned(),
        state,
        until: asked.sent + asked.lease,
        unanswered_at_ms,
    });
    recount(&slots);
}

/// Keeps this process's entries, but a release past its slot's lease (unless Redis may run
/// its admission later still).
fn prune(slots: &mut Vec<Slot>) {
    let pid = resilient_core::current_pid();
    let now = Instant::now();
    slots.retain(|s| {
        s.pid == pid && (s.state == State::Held || now < s.until || s.may_run_later(now))
    });
}

fn recount(slots: &[Slot]) {
    UNSETTLED.store(
        slots.iter().filter(|s| s.state != State::Held).count(),
        Ordering::Relaxed,
    );
}

fn of(slot: &Slot, server: &Server) -> bool {
    std::ptr::eq(Arc::as_ptr(&slot.server), server) && slot.pid == resilient_core::current_pid()
}

/// A slot Redis granted: held until its permit's release.
pub(crate) fn add(asked: &Asked<'_>) {
    push(asked, State::Held, None);
}

/// An admission whose answer never came although its script may have been written: Redis may
/// run it late and hold the token, so it is given back like a release.
pub(crate) fn unanswered(asked: &Asked<'_>) {
    // The time it was sent, as `Server::answered_ms` counts: an answer read in the same
    // millisecond may be to an earlier command, so only a later one counts.
    let sent_ms = resilient_core::clock::monotonic_ms()
        .saturating_sub(asked.sent.elapsed().as_millis() as u64);
    push(asked, State::ToRelease, Some(sent_ms));
}

/// The permit of `token` ended: its slot is to be given back (by the next write to its server).
pub(crate) fn release(token: &str) {
    let mut slots = slots();
    if let Some(s) = slots.iter_mut().find(|s| s.token == token) {
        s.state = State::ToRelease;
    }
    recount(&slots);
}

/// The ZREMs of `server`'s slots to release, packed in one write, with the entry each reply
/// answers for; marked sent. None when there are none.
pub(crate) fn take_to_send(server: &Server) -> Option<(Vec<u8>, Vec<u64>)> {
    if UNSETTLED.load(Ordering::Relaxed) == 0 {
        return None;
    }
    let mut slots = slots();
    prune(&mut slots);
    let mut packed = Vec::new();
    let mut replies = Vec::new();
    for s in slots
        .iter_mut()
        .filter(|s| s.state == State::ToRelease && of(s, server))
    {
        for key in std::iter::once(&s.key).chain(&s.background_key) {
            packed.extend(
                redis::cmd("ZREM")
                    .arg(key)
                    .arg(&s.token)
                    .get_packed_command(),
            );
            replies.push(s.id);
        }
        s.state = State::Sent;
    }
    recount(&slots);
    (!replies.is_empty()).then_some((packed, replies))
}

/// How many slots this process still has to give back (released, not yet answered by Redis).
#[doc(hidden)]
pub fn releases_owed() -> usize {
    let mut slots = slots();
    prune(&mut slots);
    slots.iter().filter(|s| s.state != State::Held).count()
}

/// Every reply on `server`'s connection was read: the ZREMs sent on it reached Redis.
pub(crate) fn answered(server: &Server) {
    settle(|slots| slots.retain(|s| !(s.state == State::Sent && of(s, server))));
}

/// Redis answered one of the ZREMs sent on `server`'s connection with an error, or the
/// connection was dropped with replies unread: they are sent again (until their leases end).
pub(crate) fn send_again(server: &Server) {
    settle(|slots| {
        for s in slots
            .iter_mut()
            .filter(|s| s.state == State::Sent && of(s, server))
        {
            s.state = State::ToRelease;
        }
    });
}

/// The release of entry `id` was answered `MOVED`: `node_for` learns the node now serving the
/// entry's key, and the release goes there (with that node's next command, or at request
/// end). False when no node could be learnt: the release stays to be sent again as refused.
pub(crate) fn moved(id: u64, node_for: impl FnOnce(&str) -> Option<Arc<Server>>) -> bool {
    let Some(key) = slots().iter().find(|s| s.id == id).map(|s| s.key.clone()) else {
        return true; // already dropped
    };
    let Some(node) = node_for(&key) else {
        return false;
    };
    let mut slots = slots();
    if let Some(s) = slots.iter_mut().find(|s| s.id == id) {
        s.server = node;
        s.state = State::ToRelease;
    }
    recount(&slots);
    true
}

fn settle(change: impl FnOnce(&mut Vec<Slot>)) {
    if UNSETTLED.load(Ordering::Relaxed) == 0 {
        return;
    }
    let mut slots = slots();
    change(&mut slots);
    recount(&slots);
}

/// Gives back every slot this process still holds or has to release on Redis (ZREM by token),
/// and reads the replies of those sent before (request end: no later command would; a
/// connection found dropped is opened again and they are sent on it); returns how many were
/// sent. Those that cannot be sent now (Redis in back-off) stay, and go with the next command
/// of this process.
pub fn release_leftovers() -> usize {
    release_with(Server::settle_releases)
}

/// [`release_leftovers`] at the process's end (after its last request end), also to a server
/// in back-off: no later command of this process would carry what it still owes, and a slot
/// left for Redis to run late would be held a whole lease (a one-shot CLI process whose call
/// timed out during a stall, its request end coming during the back-off that started).
pub fn release_leftovers_at_exit() -> usize {
    // Each server's wait is at most half of what is left (`Server::wait`), so however many
    // there are, a Redis that does not answer (blackholed) holds the exit about this long.
    resilient_http::with_time_left(AT_EXIT_WAIT, || {
        release_with(Server::settle_releases_at_exit)
    })
}

/// The longest a process's end waits for Redis to take what it owes, all servers together
/// (each at least `connection::LEAST_WAIT`, 10 ms).
pub const AT_EXIT_WAIT: Duration = Duration::from_millis(500);

fn release_with(settle: fn(&Server) -> Result<(), crate::Unreachable>) -> usize {
    let first = servers_to_settle(&[]);
    let before = to_release();
    settle_on(&first, settle);
    // A release answered `MOVED` there now goes to another node: settled there too.
    settle_on(&servers_to_settle(&first), settle);
    before.saturating_sub(to_release())
}

/// Marks every slot still here to be given back (but those sent, whose replies are read when
/// their server is settled: that tells whether Redis got them); the servers they go to, but
/// those in `settled`.
fn servers_to_settle(settled: &[Arc<Server>]) -> Vec<Arc<Server>> {
    let mut slots = slots();
    prune(&mut slots);
    let mut servers: Vec<Arc<Server>> = Vec::new();
    for s in slots.iter_mut() {
        if s.state != State::Sent {
            s.state = State::ToRelease;
        }
        let known = |k: &Arc<Server>| Arc::ptr_eq(k, &s.server);
        if !settled.iter().any(known) && !servers.iter().any(known) {
            servers.push(s.server.clone());
        }
    }
    recount(&slots);
    servers
}

fn settle_on(servers: &[Arc<Server>], settle: fn(&Server) -> Result<(), crate::Unreachable>) {
    for server in servers {
        let _ = settle(server);
    }
}

fn to_release() -> usize {
    slots()
        .iter()
        .filter(|s| s.state == State::ToRelease)
        .count()
}
