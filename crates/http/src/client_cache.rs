//! The reqwest clients of a process: chosen by connect timeout and connection options, and one
//! of its own for an origin whose connection stopped answering.
//!
//! Why an origin gets its own: over HTTP/2 every request to an origin goes down one connection,
//! and a reqwest client cannot be told to drop one of its connections. A connection whose path
//! died silently (no FIN, no RST: a load balancer node or a NAT entry gone) would take every
//! later request to that origin, from every `Client` of the process, into the same silence.
//! So once an attempt timed out there, the origin's requests go to a new client (a new
//! connection), and the other origins of the client it left keep their connections.

use crate::transport_options::TransportOptions;

/// Clients kept; beyond this the least recently made one is dropped, an origin's own first.
pub const MAX_CLIENTS: usize = 16;

struct Entry<C> {
    connect_ms: u64,
    fingerprint: u64,
    /// The one origin this client serves; `None`: every origin.
    origin: Option<String>,
    id: u64,
    /// What the client was made from (to make the origin's own).
    options: TransportOptions,
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
    /// when it has one, else the shared one, made with `make` when there is none yet.
    pub fn get<E>(
        &mut self,
        connect_ms: u64,
        options: &TransportOptions,
        origin: &str,
        make: impl FnOnce() -> Result<C, E>,
    ) -> Result<(u64, C), E> {
        let fingerprint = options.fingerprint();
        if let Some(entry) = self.find(connect_ms, fingerprint, origin) {
            return Ok((entry.id, entry.client.clone()));
        }
        let client = make()?;
        let id = self.insert(
            connect_ms,
            fingerprint,
            None,
            options.clone(),
            client.clone(),
        );
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
            .is_none_or(|current| current.id != used)
        {
            return false;
        }
        let options = entry.options.clone();
        let Ok(client) = make(connect_ms, &options) else {
            return false;
        };
        self.entries
            .retain(|e| !(e.id == used && e.origin.as_deref() == Some(origin)));
        self.insert(
            connect_ms,
            fingerprint,
            Some(origin.to_owned()),
            options,
            client,
        );
        true
    }

    /// Clients kept now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn find(&self, connect_ms: u64, fingerprint: u64, origin: &str) -> Option<&Entry<C>> {
        let mut shared = None;
        for entry in &self.entries {
            if entry.connect_ms != connect_ms || entry.fingerprint != fingerprint {
                continue;
            }
            match entry.origin.as_deref() {
                Some(own) if own == origin => return Some(entry),
                None => shared = Some(entry),
                Some(_) => {}
            }
        }
        shared
    }

    fn insert(
        &mut self,
        connect_ms: u64,
        fingerprint: u64,
        origin: Option<String>,
        options: TransportOptions,
        client: C,
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
            origin,
            id: self.made,
            options,
            client,
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
}
