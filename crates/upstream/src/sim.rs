//! The lab's upstream simulator: `capacity` requests served at once, the rest wait in a FIFO
//! queue, each takes `service_ms`.
//!
//! Like a real overloaded upstream, it does not know when a client gives up: the work of every
//! request that arrived runs to the end in a detached task that holds the slot, while the
//! connection's handler merely awaits it. When hyper drops the handler (the client went away),
//! only the row's `gone_ms` is stamped; the slot stays busy until the service time is over.
//!
//! Four kinds of bad phase, all switched at run time: slow (`service_ms`), a share of errors
//! drawn per request (`fail_ratio`: answered `fail_status` after the service time, so failures
//! cost the upstream as much as successes), shedding (`shed_rps`: at most that many requests a
//! second are admitted, the rest answered `fail_status` at once, as a server or gateway under
//! overload does: "503, I cannot take it now"; whoever sends more gets more 503s) and an outage
//! (`outage`: every request is answered `fail_status` at once, without a slot or a service time,
//! as a load balancer does when no backend is healthy).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hyper::body::Incoming;
use hyper::http::{Request, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::body::{self, CloseConnection, HandlerResult};
use crate::clock::Clock;
use crate::mock::{read_body, request_info};
use crate::query;
use crate::App;

/// Rows kept; beyond this arrivals are still served and counted.
pub const MAX_ROWS: usize = 2_000_000;

/// Run-time settings (`POST /__control/sim` changes them while load is running).
#[derive(Debug, Clone, Serialize)]
pub struct SimConfig {
    /// Requests served at once.
    pub capacity: u32,
    /// Service time of each request, read when its service starts.
    pub service_ms: u64,
    /// Share of requests answered with `fail_status` (after their service time).
    pub fail_ratio: f64,
    pub fail_status: u16,
    /// Outage: every arrival is answered `fail_status` at once, without taking a slot.
    pub outage: bool,
    /// Admits at most this many requests a second (a token bucket holding 100 ms of them, at
    /// least one); the others are answered `fail_status` at once, without a slot. 0: off.
    pub shed_rps: f64,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            capacity: 4,
            service_ms: 20,
            fail_ratio: 0.0,
            fail_status: 503,
            outage: false,
            shed_rps: 0.0,
        }
    }
}

/// `POST /__control/sim` body: any subset of the settings.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SimUpdate {
    pub capacity: Option<u32>,
    pub service_ms: Option<u64>,
    pub fail_ratio: Option<f64>,
    pub fail_status: Option<u16>,
    pub outage: Option<bool>,
    pub shed_rps: Option<f64>,
}

/// One request as the simulator saw it (times: monotonic ms since server start).
#[derive(Debug, Clone, Serialize)]
pub struct SimRow {
    pub seq: u64,
    /// Arrival.
    pub t_ms: f64,
    pub unix_ms: f64,
    /// Service started (it got a slot).
    pub start_ms: Option<f64>,
    /// Service ended (slot freed).
    pub end_ms: Option<f64>,
    /// The client disconnected before getting the answer.
    pub gone_ms: Option<f64>,
    pub status: Option<u16>,
    /// Requests waiting in the queue when this one arrived (not counting itself).
    pub queue_at_arrival: u32,
    /// Requests in service when this one arrived.
    pub in_service_at_arrival: u32,
    /// It had to wait in the queue (no free slot at arrival).
    pub queued: bool,
    /// `X-Request-Id` header, if sent.
    pub request_id: Option<String>,
    /// `X-Attempt` header, if sent.
    pub attempt: Option<String>,
}

impl SimRow {
    /// Answered at once during an outage, or shed: a status, but never queued and never served
    /// (no start or end).
    pub fn outage(&self) -> bool {
        self.status.is_some() && self.start_ms.is_none() && !self.queued
    }
}

/// Totals since the last reset, for `/__control/stats`.
#[derive(Debug, Clone, Serialize)]
pub struct SimStats {
    pub config: SimConfig,
    /// When the counters were last reset (monotonic ms since server start).
    pub since_ms: f64,
    pub arrivals: u64,
    pub completed: u64,
    pub failed: u64,
    /// Clients that went away before their answer.
    pub client_gone: u64,
    /// Services completed for a client that had already gone: wasted upstream work.
    pub completed_after_gone: u64,
    /// Answered at once during an outage (also counted in `arrivals`, not in `completed`).
    pub outage_answered: u64,
    /// Answered at once because over `shed_rps` (also counted in `arrivals`, not in `completed`).
    pub shed_answered: u64,
    pub in_service: u32,
    pub queued: u32,
    pub max_in_service: u32,
    pub max_queue: u32,
    pub rows_dropped: u64,
}

/// The simulator's shared state.
pub struct Sim {
    state: Mutex<State>,
    clock: Clock,
}

struct State {
    config: SimConfig,
    in_service: u32,
    /// Waiting requests: their seq and the ticket that wakes their work.
    queue: VecDeque<(u64, oneshot::Sender<()>)>,
    rows: Vec<SimRow>,
    /// `seq` of `rows[0]`; rows of requests that arrived before a reset are ignored.
    first_seq: u64,
    next_seq: u64,
    since_ms: f64,
    rng: u64,
    arrivals: u64,
    completed: u64,
    failed: u64,
    client_gone: u64,
    completed_after_gone: u64,
    outage_answered: u64,
    shed_answered: u64,
    /// `shed_rps`'s bucket: tokens, and when it was last filled (ms).
    shed_tokens: f64,
    shed_filled_ms: f64,
    max_in_service: u32,
    max_queue: u32,
    rows_dropped: u64,
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl State {
    fn row(&mut self, seq: u64) -> Option<&mut SimRow> {
        let i = seq.checked_sub(self.first_seq)? as usize;
        self.rows.get_mut(i)
    }

    /// Hands free slots to the head of the queue (FIFO). The service start is stamped here,
    /// when the slot is assigned, so start times follow the queue order exactly.
    fn grant(&mut self, now_ms: f64) {
        while self.in_service < self.config.capacity {
            let Some((seq, tx)) = self.queue.pop_front() else {
                break;
            };
            self.in_service += 1;
            if tx.send(()).is_err() {
                // Its task no longer exists (runtime shutting down): the slot stays free.
                self.in_service -= 1;
                continue;
            }
            if let Some(r) = self.row(seq) {
                r.start_ms = Some(now_ms);
            }
        }
        self.max_in_service = self.max_in_service.max(self.in_service);
    }

    /// Whether `shed_rps` admits an arrival at `now_ms` (takes a token if so).
    fn admits(&mut self, now_ms: f64) -> bool {
        let rate = self.config.shed_rps;
        if rate <= 0.0 {
            return true;
        }
        let size = (rate / 10.0).max(1.0);
        let elapsed_s = (now_ms - self.shed_filled_ms).max(0.0) / 1000.0;
        self.shed_tokens = (self.shed_tokens + elapsed_s * rate).min(size);
        self.shed_filled_ms = now_ms;
        if self.shed_tokens >= 1.0 {
            self.shed_tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// splitmix64: deterministic failures for a given sequence of arrivals.
    fn next_unit(&mut self) -> f64 {
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Sim {
    pub fn new(config: SimConfig, clock: Clock) -> Sim {
        Sim {
            clock,
            state: Mutex::new(State {
                config,
                in_service: 0,
                queue: VecDeque::new(),
                rows: Vec::new(),
                first_seq: 1,
                next_seq: 1,
                since_ms: 0.0,
                rng: 0x5EED,
                arrivals: 0,
                completed: 0,
                failed: 0,
                client_gone: 0,
                completed_after_gone: 0,
                outage_answered: 0,
                shed_answered: 0,
                shed_tokens: 0.0,
                shed_filled_ms: 0.0,
                max_in_service: 0,
                max_queue: 0,
                rows_dropped: 0,
            }),
        }
    }

    pub fn config(&self) -> SimConfig {
        lock(&self.state).config.clone()
    }

    /// Applies a partial update; a larger capacity admits queued requests at once.
    pub fn update(&self, u: SimUpdate) -> Result<SimConfig, String> {
        if u.capacity == Some(0) {
            return Err("capacity must be at least 1".into());
        }
        if u.service_ms
            .is_some_and(|ms| ms > crate::script::MAX_WAIT_MS)
        {
            return Err(format!(
                "service_ms must be at most {}",
                crate::script::MAX_WAIT_MS
            ));
        }
        if u.fail_ratio.is_some_and(|r| !(0.0..=1.0).contains(&r)) {
            return Err("fail_ratio must be within 0..=1".into());
        }
        if u.shed_rps.is_some_and(|r| !(r.is_finite() && r >= 0.0)) {
            return Err("shed_rps must be a finite number ≥ 0".into());
        }
        if u.fail_status
            .is_some_and(|s| StatusCode::from_u16(s).map_or(true, |s| s.as_u16() < 200))
        {
            return Err("fail_status must be a final HTTP status".into());
        }
        let mut s = lock(&self.state);
        if let Some(c) = u.capacity {
            s.config.capacity = c;
        }
        if let Some(ms) = u.service_ms {
            s.config.service_ms = ms;
        }
        if let Some(r) = u.fail_ratio {
            s.config.fail_ratio = r;
        }
        if let Some(st) = u.fail_status {
            s.config.fail_status = st;
        }
        if let Some(o) = u.outage {
            s.config.outage = o;
        }
        if let Some(r) = u.shed_rps {
            let now = self.clock.t_ms();
            if s.config.shed_rps <= 0.0 {
                // Switched on: a full bucket, as if it had been on all along.
                s.shed_tokens = (r / 10.0).max(1.0);
                s.shed_filled_ms = now;
            }
            s.config.shed_rps = r;
        }
        s.grant(self.clock.t_ms());
        Ok(s.config.clone())
    }

    /// Forgets rows and totals. Work in progress keeps its slots (it is still running) but
    /// will not be recorded.
    pub fn reset(&self, now_ms: f64) {
        let mut s = lock(&self.state);
        s.rows.clear();
        s.first_seq = s.next_seq;
        s.since_ms = now_ms;
        s.arrivals = 0;
        s.completed = 0;
        s.failed = 0;
        s.client_gone = 0;
        s.completed_after_gone = 0;
        s.outage_answered = 0;
        s.shed_answered = 0;
        s.rows_dropped = 0;
        s.max_in_service = s.in_service;
        s.max_queue = s.queue.len() as u32;
    }

    pub fn stats(&self) -> SimStats {
        let s = lock(&self.state);
        SimStats {
            config: s.config.clone(),
            since_ms: s.since_ms,
            arrivals: s.arrivals,
            completed: s.completed,
            failed: s.failed,
            client_gone: s.client_gone,
            completed_after_gone: s.completed_after_gone,
            outage_answered: s.outage_answered,
            shed_answered: s.shed_answered,
            in_service: s.in_service,
            queued: s.queue.len() as u32,
            max_in_service: s.max_in_service,
            max_queue: s.max_queue,
            rows_dropped: s.rows_dropped,
        }
    }

    /// Rows with `seq > since`, in arrival order.
    pub fn rows_since(&self, since: u64) -> Vec<SimRow> {
        let s = lock(&self.state);
        let skip = since
            .saturating_sub(s.first_seq - 1)
            .min(s.rows.len() as u64) as usize;
        s.rows[skip..].to_vec()
    }

    /// When the counters were last reset.
    pub fn since_ms(&self) -> f64 {
        lock(&self.state).since_ms
    }

    /// Records an arrival. Returns its seq and what happens to it: during an outage, or over
    /// `shed_rps`, it is answered at once (no slot); otherwise, when every slot is busy, the
    /// ticket it must wait for; without a ticket it already holds a slot.
    fn arrive(&self, request_id: Option<String>, attempt: Option<String>) -> (u64, Admission) {
        let mut s = lock(&self.state);
        // Read under the lock, so that seq order is also time order (two arrivals racing
        // for the lock would otherwise record times that run backwards by a few ns).
        let t_ms = self.clock.t_ms();
        let unix_ms = self.clock.unix_ms();
        let seq = s.next_seq;
        s.next_seq += 1;
        s.arrivals += 1;
        let outage = s.config.outage;
        if outage || !s.admits(t_ms) {
            let status = s.config.fail_status;
            if outage {
                s.outage_answered += 1;
            } else {
                s.shed_answered += 1;
            }
            let row = SimRow {
                seq,
                t_ms,
                unix_ms,
                start_ms: None,
                end_ms: None,
                gone_ms: None,
                status: Some(status),
                queue_at_arrival: s.queue.len() as u32,
                in_service_at_arrival: s.in_service,
                queued: false,
                request_id,
                attempt,
            };
            if s.rows.len() < MAX_ROWS {
                s.rows.push(row);
            } else {
                s.rows_dropped += 1;
            }
            return (
                seq,
                Admission::AtOnce(
                    status,
                    if outage {
                        "simulated outage"
                    } else {
                        "shed: over the admitted rate"
                    },
                ),
            );
        }
        let queued = !(s.in_service < s.config.capacity && s.queue.is_empty());
        let row = SimRow {
            seq,
            t_ms,
            unix_ms,
            // A free slot: service starts now. Otherwise `grant` stamps it.
            start_ms: (!queued).then_some(t_ms),
            end_ms: None,
            gone_ms: None,
            status: None,
            queue_at_arrival: s.queue.len() as u32,
            in_service_at_arrival: s.in_service,
            queued,
            request_id,
            attempt,
        };
        if s.rows.len() < MAX_ROWS {
            s.rows.push(row);
        } else {
            s.rows_dropped += 1;
        }
        let admission = if !queued {
            s.in_service += 1;
            s.max_in_service = s.max_in_service.max(s.in_service);
            Admission::Serve(None)
        } else {
            let (tx, rx) = oneshot::channel();
            s.queue.push_back((seq, tx));
            s.max_queue = s.max_queue.max(s.queue.len() as u32);
            Admission::Serve(Some(rx))
        };
        (seq, admission)
    }

    /// Service begins (the slot was assigned just before): the service time and the status
    /// to answer.
    fn start(&self) -> (Duration, u16) {
        let mut s = lock(&self.state);
        let service = Duration::from_millis(s.config.service_ms);
        let fail = s.config.fail_ratio > 0.0 && s.next_unit() < s.config.fail_ratio;
        let status = if fail { s.config.fail_status } else { 200 };
        (service, status)
    }

    /// Service ends: stamps the row, frees the slot, admits the next in line.
    fn finish(&self, seq: u64, status: u16) {
        let mut s = lock(&self.state);
        let now = self.clock.t_ms();
        let mut after_gone = false;
        let counted = if let Some(r) = s.row(seq) {
            r.end_ms = Some(now);
            r.status = Some(status);
            after_gone = r.gone_ms.is_some();
            true
        } else {
            seq >= s.first_seq // arrived after the reset but its row was not kept
        };
        if counted {
            s.completed += 1;
            if status >= 400 {
                s.failed += 1;
            }
            if after_gone {
                s.completed_after_gone += 1;
            }
        }
        s.in_service = s.in_service.saturating_sub(1);
        s.grant(now);
    }

    /// The client disconnected before its answer was handed over.
    fn client_gone(&self, seq: u64) {
        let mut s = lock(&self.state);
        let now = self.clock.t_ms();
        let marked = match s.row(seq) {
            Some(r) if r.gone_ms.is_none() => {
                r.gone_ms = Some(now);
                true
            }
            _ => false,
        };
        if marked {
            s.client_gone += 1;
        }
    }
}

/// What happens to an arrival.
enum Admission {
    /// Served: at once (`None`, it holds a slot) or when the ticket says a slot is its turn.
    Serve(Option<oneshot::Receiver<()>>),
    /// The upstream is out, or sheds this one: answered this status (and error) at once.
    AtOnce(u16, &'static str),
}

/// Stamps `gone_ms` if the handler is dropped while still waiting for its work.
struct GoneWatch {
    sim: Arc<App>,
    seq: u64,
    armed: bool,
}

impl Drop for GoneWatch {
    fn drop(&mut self) {
        if self.armed {
            self.sim.sim.client_gone(self.seq);
        }
    }
}

/// Serves `GET /sim/...`: waits for a slot, "works" for `service_ms`, answers a quote.
pub async fn handle(app: Arc<App>, req: Request<Incoming>) -> HandlerResult {
    let info = request_info(&req, req.uri().path().to_string());
    // Consume the body so hyper can notice a client that goes away.
    if read_body(req.into_body()).await.is_err() {
        return Err(CloseConnection);
    }
    let clean = |name: &str| info.headers.get(name).map(|v| sanitize(v));
    let (seq, admission) = app.sim.arrive(clean("x-request-id"), clean("x-attempt"));
    let ticket = match admission {
        Admission::Serve(ticket) => ticket,
        Admission::AtOnce(status, error) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::SERVICE_UNAVAILABLE);
            return Ok(body::json(
                status,
                &serde_json::json!({ "error": error, "seq": seq }),
            ));
        }
    };
    let mut watch = GoneWatch {
        sim: app.clone(),
        seq,
        armed: true,
    };
    let worker = app.clone();
    // Detached: keeps running (and holding its slot) if the client leaves and this handler is
    // dropped.
    let work = tokio::spawn(async move {
        if let Some(ticket) = ticket {
            let _ = ticket.await;
        }
        let (service, status) = worker.sim.start();
        tokio::time::sleep(service).await;
        worker.sim.finish(seq, status);
        (service, status)
    });
    let (service, status) = work.await.map_err(|_| CloseConnection)?;
    watch.armed = false;
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    let pairs = query::parse(Some(info.query.as_str()));
    let postcode = query::get(&pairs, "postcode").unwrap_or("");
    let value = if status.is_success() {
        serde_json::json!({
            "quote": quote_for(postcode),
            "postcode": postcode,
            "seq": seq,
            "service_ms": service.as_millis() as u64,
        })
    } else {
        serde_json::json!({ "error": "simulated failure", "seq": seq })
    };
    Ok(body::json(status, &value))
}

/// A stable price per postcode, so answers look like data.
fn quote_for(postcode: &str) -> f64 {
    let h = postcode.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    40.0 + (h % 2000) as f64 / 100.0
}

/// Keeps ids printable and CSV-safe.
fn sanitize(v: &str) -> String {
    v.chars()
        .filter(|c| c.is_ascii_graphic() && *c != ',' && *c != '"')
        .take(128)
        .collect()
}
