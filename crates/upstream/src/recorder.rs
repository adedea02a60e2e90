//! Per-key state of the mock: the scripts, their step cursors and every attempt received.
//!
//! Each key has its own lock, so parallel tests on distinct keys never wait on each other.
//! An [`AttemptGuard`] lives as long as the request is being served; when it is dropped without
//! being finished (hyper drops the handler when the client disconnects) the row says
//! `abandoned`, with the time the server noticed.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use tokio::sync::Notify;

use crate::clock::Clock;
use crate::received::{BodySummary, PartRow};
use crate::script::{Script, Step};

/// Rows kept per key; later requests are still counted and served, not stored.
pub const MAX_ROWS_PER_KEY: usize = 100_000;

/// How a recorded request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Still being served.
    InFlight,
    /// A response was sent (for a drip: the last body byte was handed to the socket).
    Answered,
    /// The server closed the connection without a response, as scripted (`close`, or a hang
    /// that reached its limit).
    Closed,
    /// The client went away before the server finished.
    Abandoned,
}

/// One request as the upstream saw it. Header names are lower-case; values are verbatim.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptRow {
    /// 1-based arrival order within the key.
    pub seq: u64,
    pub method: String,
    /// Path after the `/k/{key}` prefix (`/quote`).
    pub path: String,
    /// Raw query string, `""` when absent.
    pub query: String,
    /// The full request target as received (`/k/key/quote?a=1`).
    pub uri: String,
    pub headers: BTreeMap<String, String>,
    pub body_len: u64,
    /// Request body as text (lossy UTF-8, first 64 KiB).
    pub body: String,
    /// The same bytes in hex when they are not valid UTF-8 (so a test can compare them byte
    /// for byte); absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub body_hex: Option<String>,
    /// FNV-1a 64 of the whole body (PHP: `hash('fnv1a64', $body)`), however long it is.
    pub body_fnv1a64: String,
    /// For a `multipart/form-data` body: its parts, each with its length and digest.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<Vec<PartRow>>,
    /// Why a multipart body could not be split into parts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub multipart_error: Option<String>,
    /// Serial number of the TCP connection the request came on (1, 2... in accept order; 0 when
    /// not known): requests sharing one were sent over a kept-alive connection.
    pub connection: u64,
    /// Arrival: monotonic ms since server start.
    pub t_ms: f64,
    /// Arrival: wall clock ms since the Unix epoch.
    pub unix_ms: f64,
    /// Requests of this key in flight at arrival, this one included.
    pub concurrent_at_arrival: u32,
    /// The key's highest concurrency up to and including this arrival.
    pub max_concurrent: u32,
    /// Index of the script step used; `null` for the echo.
    pub step: Option<usize>,
    pub outcome: Outcome,
    /// Status sent, when a response was sent.
    pub status: Option<u16>,
    /// When the request finished or was abandoned (monotonic ms since server start).
    pub end_t_ms: Option<f64>,
    pub duration_ms: Option<f64>,
}

/// What the router knows about a request when it arrives.
#[derive(Debug, Clone)]
pub struct RequestInfo {
    pub method: String,
    pub path: String,
    pub query: String,
    pub uri: String,
    pub headers: BTreeMap<String, String>,
    /// The server's serial number of the TCP connection the request came on.
    pub connection: u64,
}

/// All keys.
#[derive(Default)]
pub struct Keys {
    map: Mutex<HashMap<String, Arc<KeyState>>>,
}

/// One key: its own lock and its own change notification.
#[derive(Default)]
pub struct KeyState {
    inner: Mutex<KeyInner>,
    changed: Notify,
}

#[derive(Default)]
struct KeyInner {
    /// The key's script (`None` path) and per-path scripts, each with its own cursor (requests
    /// it has answered since it was set).
    scripts: HashMap<Option<String>, (Script, usize)>,
    seq: u64,
    rows: Vec<AttemptRow>,
    in_flight: u32,
    max_concurrent: u32,
}

/// Totals over all keys, for `/__control/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct KeysSummary {
    pub keys: usize,
    pub requests: u64,
    pub in_flight: u32,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave these plain counters inconsistent enough to
    // matter for a test tool; keep serving.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Keys {
    /// The key's state, created on first use.
    pub fn get(&self, key: &str) -> Arc<KeyState> {
        lock(&self.map).entry(key.to_string()).or_default().clone()
    }

    /// Sets (replaces) a key's script, or the script for one path of the key (a request whose
    /// path matches exactly uses it instead of the key's). The step cursor restarts; recorded
    /// attempts stay.
    pub fn set_script(&self, key: &str, path: Option<String>, script: Script) {
        let k = self.get(key);
        lock(&k.inner).scripts.insert(path, (script, 0));
    }

    /// Forgets one key (script and attempts) or all of them. Requests still in flight finish
    /// against the forgotten state and do not show up in the new one.
    pub fn reset(&self, key: Option<&str>) {
        let mut map = lock(&self.map);
        match key {
            Some(k) => {
                map.remove(k);
            }
            None => map.clear(),
        }
    }

    pub fn summary(&self) -> KeysSummary {
        let map = lock(&self.map);
        let mut s = KeysSummary {
            keys: map.len(),
            requests: 0,
            in_flight: 0,
        };
        for k in map.values() {
            let inner = lock(&k.inner);
            s.requests += inner.seq;
            s.in_flight += inner.in_flight;
        }
        s
    }
}

impl KeyState {
    /// Records an arrival and picks its step (in arrival order).
    pub fn arrive(
        self: &Arc<Self>,
        clock: Clock,
        req: RequestInfo,
    ) -> (AttemptGuard, Option<(usize, Step)>) {
        let mut guard = lock(&self.inner);
        // Under the lock: seq order is then also time order.
        let t_ms = clock.t_ms();
        let unix_ms = clock.unix_ms();
        let inner = &mut *guard;
        inner.seq += 1;
        inner.in_flight += 1;
        inner.max_concurrent = inner.max_concurrent.max(inner.in_flight);
        let by_path = Some(req.path.clone());
        let script = match inner.scripts.contains_key(&by_path) {
            true => inner.scripts.get_mut(&by_path),
            false => inner.scripts.get_mut(&None),
        };
        let step = script.and_then(|(script, n)| {
            *n += 1;
            script.step_for(*n - 1).map(|(i, s)| (i, s.clone()))
        });
        let row = (inner.rows.len() < MAX_ROWS_PER_KEY).then(|| {
            inner.rows.push(AttemptRow {
                seq: inner.seq,
                method: req.method,
                path: req.path,
                query: req.query,
                uri: req.uri,
                headers: req.headers,
                body_len: 0,
                body: String::new(),
                body_hex: None,
                body_fnv1a64: crate::received::Fnv1a64::default().hex(),
                parts: None,
                multipart_error: None,
                connection: req.connection,
                t_ms,
                unix_ms,
                concurrent_at_arrival: inner.in_flight,
                max_concurrent: inner.max_concurrent,
                step: step.as_ref().map(|(i, _)| *i),
                outcome: Outcome::InFlight,
                status: None,
                end_t_ms: None,
                duration_ms: None,
            });
            inner.rows.len() - 1
        });
        let seq = inner.seq;
        drop(guard);
        self.changed.notify_waiters();
        let guard = AttemptGuard {
            key: self.clone(),
            row,
            seq,
            clock,
            done: false,
        };
        (guard, step)
    }

    /// A copy of the recorded rows, in arrival order.
    pub fn rows(&self) -> Vec<AttemptRow> {
        lock(&self.inner).rows.clone()
    }

    /// Waits until at least `min` requests arrived and, if `idle`, none is in flight; gives up
    /// after `timeout`. Returns whether the condition holds.
    pub async fn wait(&self, min: u64, idle: bool, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let inner = lock(&self.inner);
                if inner.seq >= min && (!idle || inner.in_flight == 0) {
                    return true;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }
}

/// Held while a request is served; finishing it (or dropping it) closes the row.
pub struct AttemptGuard {
    key: Arc<KeyState>,
    row: Option<usize>,
    seq: u64,
    clock: Clock,
    done: bool,
}

impl AttemptGuard {
    /// 1-based arrival order within the key.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Fills in what was kept of the request body once it has been read.
    pub fn set_body(&self, body: BodySummary) {
        if let Some(i) = self.row {
            let mut inner = lock(&self.key.inner);
            let row = &mut inner.rows[i];
            let kept = &body.kept;
            row.body_len = body.len;
            row.body = String::from_utf8_lossy(kept).into_owned();
            row.body_hex = std::str::from_utf8(kept)
                .is_err()
                .then(|| kept.iter().map(|b| format!("{b:02x}")).collect());
            row.body_fnv1a64 = body.fnv1a64;
            row.parts = body.parts;
            row.multipart_error = body.multipart_error;
        }
    }

    /// Marks the request finished.
    pub fn finish(mut self, outcome: Outcome, status: Option<u16>) {
        self.close(outcome, status);
    }

    fn close(&mut self, outcome: Outcome, status: Option<u16>) {
        if self.done {
            return;
        }
        self.done = true;
        let end = self.clock.t_ms();
        let mut inner = lock(&self.key.inner);
        inner.in_flight = inner.in_flight.saturating_sub(1);
        if let Some(i) = self.row {
            let row = &mut inner.rows[i];
            row.outcome = outcome;
            row.status = status;
            row.end_t_ms = Some(end);
            row.duration_ms = Some(end - row.t_ms);
        }
        drop(inner);
        self.key.changed.notify_waiters();
    }
}

impl Drop for AttemptGuard {
    fn drop(&mut self) {
        self.close(Outcome::Abandoned, None);
    }
}
