//! Samples, every 250 ms while the load runs: php-fpm's busy/idle workers and listen queue
//! (from the pool's status page, served by its own listener so it answers even when every worker
//! is busy), the upstream's in-service/queued levels, and for the resilient variants the
//! extension's own state read straight from their shared-memory segment (the breaker of
//! `shipping`, its attempt counter, its funnel's learned limit): no PHP worker is needed to read it, so a busy pool does
//! not hide it.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use tokio::time::Instant;

use crate::upstream::Upstream;

pub const PERIOD: Duration = Duration::from_millis(250);

/// One sample; a field is None when its source did not answer in time.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub fpm_active: Option<u32>,
    pub fpm_idle: Option<u32>,
    pub fpm_listen_queue: Option<u32>,
    pub upstream_in_service: Option<u32>,
    pub upstream_queued: Option<u32>,
    /// The breaker of `shipping` as the extension's metrics show it: closed, open, half_open.
    pub breaker: Option<&'static str>,
    /// The extension's attempt counter for `shipping` (since its reset after the warm-up).
    pub ext_attempts: Option<u64>,
    /// The funnel's learned limit (`'limit' => 'auto'`; what `Funnel::stats()` shows), when it has one.
    pub learned_limit: Option<f64>,
}

/// The upstream name the lab app's clients use.
const UPSTREAM: &str = "shipping";

/// Reads the extension's metrics of [`UPSTREAM`] from the variant's segment, once PHP made it.
struct ExtensionState {
    path: Option<PathBuf>,
    segment: Option<resilient_core::Segment>,
}

impl ExtensionState {
    /// The breaker's state, the attempt counter and the funnel's learned limit.
    fn read(&mut self) -> (Option<&'static str>, Option<u64>, Option<f64>) {
        if self.segment.is_none() {
            // An existing file keeps its own slot count: 1 is never used to create one here.
            self.segment = self
                .path
                .as_deref()
                .filter(|p| p.exists())
                .and_then(|p| resilient_core::Segment::open(p, 1).ok());
        }
        let Some(seg) = &self.segment else {
            return (None, None, None);
        };
        resilient_core::metrics::snapshot_all(seg)
            .into_iter()
            .find(|(name, _)| name == UPSTREAM)
            .map_or((None, None, None), |(_, m)| {
                (
                    Some(m.breaker().as_str()),
                    Some(m.attempts),
                    m.learned.map(|l| l.limit()),
                )
            })
    }
}

/// The FPM status fields the lab uses.
#[derive(Debug, Clone, Default, Serialize)]
pub struct FpmStatus {
    pub active: u32,
    pub idle: u32,
    pub listen_queue: u32,
    pub max_listen_queue: u32,
    pub max_active: u32,
}

pub async fn fpm_status(http: &reqwest::Client, base: &str) -> Option<FpmStatus> {
    let v: serde_json::Value = http
        .get(format!("{base}/fpm-status?json"))
        .timeout(Duration::from_secs(1))
        .send()
        .await
        .ok()?
        .json()
        .await
        .ok()?;
    let n = |k: &str| v.get(k).and_then(|x| x.as_u64()).map(|x| x as u32);
    Some(FpmStatus {
        active: n("active processes")?,
        idle: n("idle processes")?,
        listen_queue: n("listen queue")?,
        max_listen_queue: n("max listen queue")?,
        max_active: n("max active processes")?,
    })
}

/// Samples until `stop` is set; the latest sample is also kept in `latest` for the progress line.
pub async fn run(
    http: reqwest::Client,
    sut_base: String,
    upstream: Arc<Upstream>,
    t0: Instant,
    stop: Arc<AtomicBool>,
    latest: Arc<Mutex<Sample>>,
    shm: Option<PathBuf>,
) -> Vec<Sample> {
    let mut ext = ExtensionState {
        path: shm,
        segment: None,
    };
    let mut out = Vec::new();
    let mut tick = tokio::time::interval(PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    while !stop.load(Ordering::Relaxed) {
        tick.tick().await;
        let t_s = (Instant::now() - t0).as_secs_f64();
        let (fpm, up) = tokio::join!(fpm_status(&http, &sut_base), upstream.level(&http));
        let (breaker, ext_attempts, learned) = ext.read();
        let s = Sample {
            breaker,
            ext_attempts,
            t_s,
            fpm_active: fpm.as_ref().map(|f| f.active),
            fpm_idle: fpm.as_ref().map(|f| f.idle),
            fpm_listen_queue: fpm.as_ref().map(|f| f.listen_queue),
            upstream_in_service: up.map(|u| u.0),
            upstream_queued: up.map(|u| u.1),
            learned_limit: learned,
        };
        *latest.lock().unwrap_or_else(|e| e.into_inner()) = s.clone();
        out.push(s);
    }
    out
}
