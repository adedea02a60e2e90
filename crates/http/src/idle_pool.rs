//! The keep-alive pool of the plain-HTTP transport: idle connections per `host:port`, bounded
//! in age, per host and in all.
//!
//! Why bounds across hosts: a long-running process (a queue worker calling its customers'
//! webhooks, an FPM worker with `pm.max_requests = 0`) may call thousands of hosts once each.
//! A pool that only ever looked at the host being called kept every other host's connection,
//! and its file descriptor, for the life of the process, until `open()` failed everywhere with
//! "Too many open files". So a put also drops the connections past [`IDLE_TIMEOUT`] of every
//! host (at most once per [`SWEEP_EVERY`]), and past [`MAX_IDLE_TOTAL`] the oldest idle
//! connection goes. Time is passed in, so tests are exact.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Idle connections older than this are not reused (servers commonly close after 5–75 s).
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle connections kept per host:port.
pub const MAX_IDLE_PER_HOST: usize = 32;
/// Idle connections kept in all: far under the 1024 descriptors a process commonly may open.
pub const MAX_IDLE_TOTAL: usize = 256;
/// How often a put looks at every host's connections for stale ones.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// Idle connections `C` by `host:port`, each with the moment it went idle.
pub struct IdlePool<C> {
    hosts: HashMap<String, Vec<(Instant, C)>>,
    total: usize,
    last_sweep: Option<Instant>,
}

impl<C> Default for IdlePool<C> {
    fn default() -> Self {
        Self {
            hosts: HashMap::new(),
            total: 0,
            last_sweep: None,
        }
    }
}

impl<C> IdlePool<C> {
    /// The newest idle connection to `key` that is younger than [`IDLE_TIMEOUT`] and `usable`
    /// says is still good; the others met on the way are dropped (closed). A host left with
    /// none keeps its (empty) entry for the connection's return; the sweep removes it.
    pub fn take(&mut self, key: &str, now: Instant, usable: impl Fn(&C) -> bool) -> Option<C> {
        let list = self.hosts.get_mut(key)?;
        while let Some((since, c)) = list.pop() {
            self.total -= 1;
            if now.saturating_duration_since(since) < IDLE_TIMEOUT && usable(&c) {
                return Some(c);
            }
        }
        None
    }

    /// Keeps `conn`, idle from `now`, unless `key` already has [`MAX_IDLE_PER_HOST`] (then it
    /// is dropped). Drops stale connections of every host first (at most once per
    /// [`SWEEP_EVERY`]), and the oldest one of all when [`MAX_IDLE_TOTAL`] are kept.
    pub fn put(&mut self, key: String, conn: C, now: Instant) {
        if self
            .last_sweep
            .is_none_or(|at| now.saturating_duration_since(at) >= SWEEP_EVERY)
        {
            self.last_sweep = Some(now);
            self.drop_stale(now);
        }
        if self
            .hosts
            .get(&key)
            .is_some_and(|l| l.len() >= MAX_IDLE_PER_HOST)
        {
            return;
        }
        if self.total >= MAX_IDLE_TOTAL {
            self.drop_oldest();
        }
        self.hosts.entry(key).or_default().push((now, conn));
        self.total += 1;
    }

    /// Idle connections kept now (all hosts).
    pub fn len(&self) -> usize {
        self.total
    }

    fn drop_stale(&mut self, now: Instant) {
        self.hosts.retain(|_, list| {
            list.retain(|(since, _)| now.saturating_duration_since(*since) < IDLE_TIMEOUT);
            !list.is_empty()
        });
        self.total = self.hosts.values().map(Vec::len).sum();
    }

    fn drop_oldest(&mut self) {
        // Each host's list is in idle order (pushed as they went idle): its first is its oldest.
        let oldest = self
            .hosts
            .iter()
            .filter_map(|(key, list)| list.first().map(|(since, _)| (*since, key)))
            .min_by_key(|(since, _)| *since)
            .map(|(_, key)| key.clone());
        if let Some(key) = oldest {
            if let Some(list) = self.hosts.get_mut(&key) {
                list.remove(0);
                self.total -= 1;
                if list.is_empty() {
                    self.hosts.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn take_gives_the_newest_usable_and_drops_stale_and_broken_ones() {
        let t0 = Instant::now();
        let mut pool = IdlePool::default();
        pool.put("a:80".into(), 1, t0);
        pool.put("a:80".into(), 2, ms(t0, 10));
        pool.put("a:80".into(), 3, ms(t0, 20));
        // 3 is broken (the server closed it): dropped; 2 is the newest good one.
        assert_eq!(pool.take("a:80", ms(t0, 30), |&c| c != 3), Some(2));
        assert_eq!(pool.len(), 1);
        // 1 is past the idle timeout by then: dropped, nothing given; the sweep of a later
        // put forgets the host.
        let late = t0 + IDLE_TIMEOUT + Duration::from_millis(1);
        assert_eq!(pool.take("a:80", late, |_| true), None);
        assert_eq!(pool.len(), 0);
        pool.put("b:80".into(), 4, late);
        assert_eq!(pool.hosts.keys().collect::<Vec<_>>(), ["b:80"]);
        assert_eq!(pool.take("c:80", late, |_| true), None);
    }

    #[test]
    fn other_hosts_stale_connections_are_dropped_by_a_later_put() {
        let t0 = Instant::now();
        let mut pool = IdlePool::default();
        for i in 0..500 {
            pool.put(format!("10.0.0.{i}:80"), i, ms(t0, i));
        }
        assert_eq!(pool.len(), MAX_IDLE_TOTAL);
        // Only one host is called from then on: the others' connections go once they are
        // stale, though nobody calls those hosts again.
        let later = t0 + IDLE_TIMEOUT + Duration::from_secs(1);
        pool.put("busy:80".into(), 9999, later);
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.hosts.len(), 1);
        assert_eq!(pool.take("busy:80", later, |_| true), Some(9999));
    }

    #[test]
    fn past_the_total_the_oldest_connection_of_any_host_goes() {
        let t0 = Instant::now();
        let mut pool = IdlePool::default();
        for i in 0..MAX_IDLE_TOTAL as u64 {
            pool.put(format!("h{i}:80"), i, ms(t0, i));
        }
        pool.put("new:80".into(), 1000, ms(t0, 500));
        assert_eq!(pool.len(), MAX_IDLE_TOTAL);
        assert_eq!(
            pool.take("h0:80", ms(t0, 501), |_| true),
            None,
            "the oldest went"
        );
        assert_eq!(pool.take("h1:80", ms(t0, 501), |_| true), Some(1));
        assert_eq!(pool.take("new:80", ms(t0, 501), |_| true), Some(1000));
    }

    #[test]
    fn a_host_keeps_at_most_its_share() {
        let t0 = Instant::now();
        let mut pool = IdlePool::default();
        for i in 0..MAX_IDLE_PER_HOST + 5 {
            pool.put("a:80".into(), i, t0);
        }
        assert_eq!(pool.len(), MAX_IDLE_PER_HOST);
    }

    #[test]
    fn the_sweep_runs_at_most_once_per_interval() {
        let t0 = Instant::now();
        let mut pool = IdlePool::default();
        pool.put("old:80".into(), 1, t0);
        // `old:80` is stale from `t - 0.5 s` on; the sweep at `t - 1 s` kept it (not stale
        // yet), and the put at `t - 0.5 s` comes too soon for another: it goes at `t`.
        let t = t0 + IDLE_TIMEOUT + Duration::from_millis(500);
        pool.put("x:80".into(), 2, t - Duration::from_millis(1000));
        pool.put("y:80".into(), 3, t - Duration::from_millis(500));
        assert_eq!(pool.len(), 3);
        pool.put("z:80".into(), 4, t);
        assert_eq!(pool.len(), 3, "old:80 swept");
        assert_eq!(pool.take("old:80", t, |_| true), None);
    }
}
