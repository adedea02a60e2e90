//! The reqwest clients of a process: chosen by connect timeout and connection options, one of
//! its own for an origin whose connection stopped answering, and a shared client replaced once
//! the shared clients have served [`MAX_SHARED_ORIGINS`] origins.
//!
//! Why an origin gets its own: over HTTP/2 every request to an origin goes down one connection,
//! and a reqwest client cannot be told to drop one of its connections. A connection whose path
//! died silently (no FIN, no RST: a load balancer node or a NAT entry gone) would take every
//! later request to that origin, from every `Client` of the process, into the same silence.
//! So once an attempt timed out there, the origin's requests go to a new client (a new
//! connection), and the other origins of the client it left keep their connections.
//!
//! Why a shared client is replaced: reqwest keeps an idle connection per origin, with no bound
//! across origins, and expires them only while a call drives the runtime. A long-running
//! process calling thousands of hosts once each (webhooks to customers' URLs) held one file
//! descriptor per host until every `connect` and `fopen` failed with "Too many open files".
//! Dropping a client (its last clone: requests in flight keep theirs) closes its connections.
//! Each client also records how each origin answered on it, so a pool knows which origins have
//! a connection open.

use std::collections::HashMap;

use crate::transport_options::TransportOptions;

/// Clients kept; beyond this the least recently made one is dropped, an origin's own first.
pub const MAX_CLIENTS: usize = 16;
/// Distinct origins the shared clients serve together; a new one past this replaces the shared
/// client that served the most. Why: each origin a client served may hold an idle connection,
/// and its file descriptor, for reqwest's 60 s (longer when no call drives the runtime), and a
/// client's connections close only when it is dropped. With the plain transport's 256
/// ([`crate::idle_pool::MAX_IDLE_TOTAL`]) a process stays far under the 1024 descriptors it
/// commonly may open, however many hosts it calls.
pub const MAX_SHARED_ORIGINS: usize = 128;

struct Entry<C> {
    connect_ms: u64,
    fingerprint: u64,
    /// The one origin this client serves; `None`: every origin.
    origin: Option<String>,
    id: u64,
    /// What the client was made from (to make the origin's own).
    options: TransportOptions,
    /// The origins this client was given, and how each last answered on it: `None` not yet,
    /// `Some(true)` over HTTP/2.
    served: HashMap<String, Option<bool>>,
    client: C,
}

/// Clients `C` by connect timeout (milliseconds), [`TransportOptions::fingerprint`] and origin.
pub struct ClientCache<C> {
    entries: Vec<Entry<C>>,
    made: u64,
}

impl<C> Default for ClientCache<C> {
    fn default() -> Self {
        Self {
            entries: Vec::new(),
            made: 0,
        }
    }
}

impl<C: Clone> ClientCache<C> {
    /// The client `origin`'s requests use with these settings, and its id: the origin's own
    /// when it has one, else the shared one, made with `make` when there is none yet (or when
    /// the shared one is replaced: [`MAX_SHARED_ORIGINS`]).
    pub fn get<E>(
        &mut self,
        connect_ms: u64,
        options: &TransportOptions,
        origin: &str,
        make: impl FnOnce() -> Result<C, E>,
    ) -> Result<(u64, C), E> {
        let fingerprint = options.fingerprint();
        let mut found = self.find(connect_ms, fingerprint, origin);
        if let Some(entry) = found.map(|i| &self.entries[i]) {
            if entry.origin.is_some() || entry.served.contains_key(origin) {
                return Ok((entry.id, entry.client.clone()));
            }
        }
        // A new origin for a shared client: within the bound, or the busiest shared one goes
        // (its idle connections close when the last request in flight on it ends).
        if self.shared_origins() >= MAX_SHARED_ORIGINS {
            if let Some(busiest) = self.busiest_shared() {
                if found == Some(busiest) {
                    // Made first: a client that cannot be made leaves the cache as it was.
                    let client = make()?;
                    self.entries.remove(busiest);
                    let id = self.insert(connect_ms, fingerprint, None, options, origin, &client);
                    return Ok((id, client));
                }
                self.entries.remove(busiest);
                found = found.map(|i| if busiest < i { i - 1 } else { i });
            }
        }
        if let Some(entry) = found.map(|i| &mut self.entries[i]) {
            entry.served.insert(origin.to_owned(), None);
            return Ok((entry.id, entry.client.clone()));
        }
        let client = make()?;
        let id = self.insert(connect_ms, fingerprint, None, options, origin, &client);
        Ok((id, client))
    }

    /// `origin`'s requests leave client `used` (an attempt timed out on its connection) for a
    /// new client of the origin's own, made by `make` from the same connect timeout and
    /// options. Nothing when the origin already left `used` (an attempt that timed out on the
    /// same connection came first) or `used` is gone. Whether a client was made.
    pub fn replace<E>(
        &mut self,
        origin: &str,
        used: u64,
        make: impl FnOnce(u64, &TransportOptions) -> Result<C, E>,
    ) -> bool {
        let Some(entry) = self.entries.iter().find(|e| e.id == used) else {
            return false;
        };
        let (connect_ms, fingerprint) = (entry.connect_ms, entry.fingerprint);
        if self
            .find(connect_ms, fingerprint, origin)
            .is_none_or(|current| self.entries[current].id != used)
        {
            return false;
        }
        let options = entry.options.clone();
        let Ok(client) = make(connect_ms, &options) else {
            return false;
        };
        self.entries
            .retain(|e| !(e.id == used && e.origin.as_deref() == Some(origin)));
        let own = Some(origin.to_owned());
        self.insert(connect_ms, fingerprint, own, &options, origin, &client);
        true
    }

    /// `origin` answered on client `id`, over HTTP/2 or not (nothing when the client is gone).
    pub fn answered(&mut self, id: u64, origin: &str, http2: bool) {
        if let Some(how) = self
            .entries
            .iter_mut()
            .find(|e| e.id == id)
            .and_then(|e| e.served.get_mut(origin))
        {
            *how = Some(http2);
        }
    }

    /// Whether `origin` last answered on client `id` over HTTP/1 (so its connection there is
    /// not the one every request to it shares).
    pub fn speaks_http1(&self, id: u64, origin: &str) -> bool {
        self.entries
            .iter()
            .find(|e| e.id == id)
            .and_then(|e| e.served.get(origin))
            == Some(&Some(false))
    }

    /// Whether `origin` has answered on the client its requests with these connection options
    /// use (its own, else a shared one): its connection is open, or was.
    pub fn is_warm(&self, fingerprint: u64, origin: &str) -> bool {
        let answered = |e: &Entry<C>| matches!(e.served.get(origin), Some(Some(_)));
        let mut shared = false;
        for entry in self.entries.iter().filter(|e| e.fingerprint == fingerprint) {
            match entry.origin.as_deref() {
                Some(own) if own == origin => return answered(entry),
                None => shared |= answered(entry),
                Some(_) => {}
            }
        }
        shared
    }

    /// Clients kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// The origins the shared clients serve together.
    fn shared_origins(&self) -> usize {
        self.entries
            .iter()
            .filter(|e| e.origin.is_none())
            .map(|e| e.served.len())
            .sum()
    }

    /// The shared client that served the most origins (the oldest of those that tie).
    fn busiest_shared(&self) -> Option<usize> {
        let mut busiest: Option<usize> = None;
        for (i, entry) in self.entries.iter().enumerate() {
            if entry.origin.is_none()
                && busiest.is_none_or(|b| entry.served.len() > self.entries[b].served.len())
            {
                busiest = Some(i);
            }
        }
        busiest
    }

    /// The position of the client `origin`'s requests use with these settings.
    fn find(&self, connect_ms: u64, fingerprint: u64, origin: &str) -> Option<usize> {
        let mut shared = None;
        for (i, entry) in self.entries.iter().enumerate() {
            if entry.connect_ms != connect_ms || entry.fingerprint != fingerprint {
                continue;
            }
            match entry.origin.as_deref() {
                Some(own) if own == origin => return Some(i),
                None => shared = Some(i),
                Some(_) => {}
            }
        }
        shared
    }

    fn insert(
        &mut self,
        connect_ms: u64,
        fingerprint: u64,
        own: Option<String>,
        options: &TransportOptions,
        origin: &str,
        client: &C,
    ) -> u64 {
        if self.entries.len() >= MAX_CLIENTS {
            let oldest = self
                .entries
                .iter()
                .position(|e| e.origin.is_some())
                .unwrap_or(0);
            self.entries.remove(oldest);
        }
        self.made += 1;
        self.entries.push(Entry {
            connect_ms,
            fingerprint,
            origin: own,
            id: self.made,
            options: options.clone(),
            served: HashMap::from([(origin.to_owned(), None)]),
            client: client.clone(),
        });
        self.made
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::convert::Infallible;

    const A: &str = "https://a:443";
    const B: &str = "https://b:443";

    /// Clients are numbered in the order they are made.
    fn maker(next: &mut u32) -> impl FnOnce() -> Result<u32, Infallible> + '_ {
        move || {
            *next += 1;
            Ok(*next)
        }
    }

    #[test]
    fn origins_share_a_client_until_one_is_replaced_then_only_that_one_moves() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        let (used, a) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        let (_, b) = cache.get(1000, &options, B, maker(&mut n)).unwrap();
        assert_eq!((a, b, cache.len()), (1, 1, 1), "shared");

        assert!(cache.replace(A, used, |_, _| Ok::<_, Infallible>(2)));
        assert_eq!(cache.get(1000, &options, A, maker(&mut n)).unwrap().1, 2);
        assert_eq!(cache.get(1000, &options, B, maker(&mut n)).unwrap().1, 1);
        // Other settings never see the origin's own client.
        assert_eq!(cache.get(500, &options, A, maker(&mut n)).unwrap().1, 2);
        assert_eq!(n, 2, "the 500 ms client was made; nothing else");
    }

    /// Every attempt that was in flight on a dead connection times out: the first one's
    /// replacement stands, the others (same client) make none.
    #[test]
    fn a_client_is_replaced_once_however_many_attempts_timed_out_on_it() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        let (shared, _) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        let mut made = 0;
        for _ in 0..8 {
            cache.replace(A, shared, |_, _| {
                made += 1;
                Ok::<_, Infallible>(10 + made)
            });
        }
        assert_eq!(made, 1);
        let (own, client) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        assert_eq!(client, 11);
        // The origin's own client times out in turn: replaced by another, not kept beside it.
        assert!(cache.replace(A, own, |ms, _| Ok::<_, Infallible>(ms as u32)));
        assert_eq!(cache.get(1000, &options, A, maker(&mut n)).unwrap().1, 1000);
        assert_eq!(cache.len(), 2, "the shared one and A's own");
    }

    #[test]
    fn origins_own_clients_go_first_when_the_cache_is_full() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        let (shared, _) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        for i in 0..MAX_CLIENTS {
            let origin = format!("https://h{i}:443");
            assert!(cache.replace(&origin, shared, |_, _| Ok::<_, Infallible>(100)));
        }
        assert_eq!(cache.len(), MAX_CLIENTS);
        assert_eq!(
            cache.get(1000, &options, B, maker(&mut n)).unwrap().1,
            1,
            "the shared client stayed"
        );
    }

    /// A long-running process calling many hosts once each: past the bound, the shared client
    /// (and with it every idle connection it holds) is replaced; an origin seen again counts
    /// once.
    #[test]
    fn the_shared_client_is_replaced_once_it_served_the_most_origins_allowed() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        for i in 0..MAX_SHARED_ORIGINS {
            let origin = format!("https://h{i}:443");
            for _ in 0..3 {
                assert_eq!(
                    cache.get(1000, &options, &origin, maker(&mut n)).unwrap().1,
                    1
                );
            }
        }
        assert_eq!(
            n, 1,
            "one client for {MAX_SHARED_ORIGINS} origins, each called 3 times"
        );

        let (id, client) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        assert_eq!(
            (client, cache.len()),
            (2, 1),
            "replaced, not kept beside it"
        );
        // The new client counts from its first origin.
        for i in 1..MAX_SHARED_ORIGINS {
            let origin = format!("https://k{i}:443");
            assert_eq!(
                cache.get(1000, &options, &origin, maker(&mut n)).unwrap(),
                (id, 2)
            );
        }
        assert_eq!(cache.get(1000, &options, B, maker(&mut n)).unwrap().1, 3);
    }

    /// The bound holds for the shared clients together: the one that served the most goes,
    /// whichever settings the new origin comes with.
    #[test]
    fn the_bound_is_across_every_shared_client() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        for i in 0..MAX_SHARED_ORIGINS - 1 {
            cache
                .get(1000, &options, &format!("https://h{i}:443"), maker(&mut n))
                .unwrap();
        }
        assert_eq!(cache.get(500, &options, A, maker(&mut n)).unwrap().1, 2);
        assert_eq!(cache.get(500, &options, B, maker(&mut n)).unwrap().1, 2);
        assert_eq!(cache.len(), 1, "the 1000 ms client, the busiest, went");
        assert_eq!(cache.get(1000, &options, A, maker(&mut n)).unwrap().1, 3);
        assert_eq!(cache.get(500, &options, A, maker(&mut n)).unwrap().1, 2);
    }

    /// A client that cannot be made leaves the cache as it was.
    #[test]
    fn a_failed_replacement_keeps_the_shared_client() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let mut n = 0;
        for i in 0..MAX_SHARED_ORIGINS {
            let origin = format!("https://h{i}:443");
            cache.get(1000, &options, &origin, maker(&mut n)).unwrap();
        }
        assert!(cache.get(1000, &options, A, || Err(())).is_err());
        assert_eq!(
            cache
                .get(1000, &options, "https://h0:443", maker(&mut n))
                .unwrap()
                .1,
            1
        );
    }

    /// Warm: the origin answered on the client its requests use; a new client (replaced, or
    /// the origin's own) is cold until it answers there.
    #[test]
    fn an_origin_is_warm_once_it_answered_on_the_client_it_uses() {
        let mut cache = ClientCache::default();
        let options = TransportOptions::default();
        let fingerprint = options.fingerprint();
        let mut n = 0;
        let (shared, _) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        assert!(!cache.is_warm(fingerprint, A));
        cache.answered(shared, A, false);
        assert!(cache.is_warm(fingerprint, A) && cache.speaks_http1(shared, A));
        assert!(!cache.is_warm(fingerprint, B), "B was never called");
        cache.answered(shared, B, true);
        assert!(!cache.is_warm(fingerprint, B), "nor given to this client");

        assert!(cache.replace(A, shared, |_, _| Ok::<_, Infallible>(2)));
        assert!(
            !cache.is_warm(fingerprint, A),
            "its own client has not answered yet"
        );
        let (own, _) = cache.get(1000, &options, A, maker(&mut n)).unwrap();
        cache.answered(own, A, true);
        assert!(cache.is_warm(fingerprint, A) && !cache.speaks_http1(own, A));

        // The shared client serves A and 127 more: the next origin replaces it.
        for i in 0..MAX_SHARED_ORIGINS - 1 {
            let origin = format!("https://h{i}:443");
            cache.get(1000, &options, &origin, maker(&mut n)).unwrap();
        }
        cache.answered(shared, "https://h0:443", true);
        assert!(cache.is_warm(fingerprint, "https://h0:443"));
        cache.get(1000, &options, B, maker(&mut n)).unwrap();
        assert!(
            !cache.is_warm(fingerprint, "https://h0:443"),
            "the client it answered on went"
        );
    }
}
