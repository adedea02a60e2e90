//! One variant of the experiment, start to finish: a fresh upstream, the system under test,
//! warm-up, then the open-loop load through the three phases (normal → slow → normal) with the
//! upstream switched at the boundaries without stopping the load, sampling all along; then the
//! upstream's attempt rows. Everything started here is stopped when this returns (guards).

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::background::{BgCall, Workers};
use crate::loadgen::{self, Counters, Outcome, Page, Record};
use crate::params::Params;
use crate::progress;
use crate::sampler::{self, FpmStatus, Sample};
use crate::sut::SystemUnderTest;
use crate::upstream::{Upstream, UpstreamAttempt};

/// Everything measured for one variant.
#[derive(Debug, Clone, Default, Serialize)]
pub struct VariantRun {
    pub name: String,
    /// Why the variant did not run (e.g. the extension's client is not built yet).
    pub skipped: Option<String>,
    #[serde(skip)]
    pub records: Vec<Record>,
    #[serde(skip)]
    pub samples: Vec<Sample>,
    #[serde(skip)]
    pub attempts: Vec<UpstreamAttempt>,
    /// When the upstream was actually switched to each next phase (seconds since t0).
    pub switches_s: Vec<f64>,
    /// FPM status at the end of the run (its max counters cover the whole run, warm-up included).
    pub fpm_final: Option<FpmStatus>,
    /// Outcomes of the warm-up requests.
    pub warmup: String,
    /// The background workers' calls (mixed scenario).
    #[serde(skip)]
    pub bg_calls: Vec<BgCall>,
    /// The extension's own metrics at the end of the run (`Resilient\Metrics::snapshot()` via
    /// /lab-metrics), when the extension has them.
    pub metrics: Option<serde_json::Value>,
}

pub async fn run_variant(p: &Params, variant: &str, dir: &Path) -> VariantRun {
    let mut run = VariantRun {
        name: variant.to_string(),
        ..Default::default()
    };
    if let Err(e) = std::fs::create_dir_all(dir) {
        run.skipped = Some(format!("cannot create {}: {e}", dir.display()));
        return run;
    }
    if let Err(e) = run_inner(p, variant, dir, &mut run).await {
        eprintln!("[{variant}] FAILED: {e}");
        run.skipped = Some(e);
    }
    run
}

async fn run_inner(
    p: &Params,
    variant: &str,
    dir: &Path,
    run: &mut VariantRun,
) -> Result<(), String> {
    let control = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| e.to_string())?;
    let upstream = Arc::new(Upstream::start(&p.upstream_bin, dir)?);
    let plan = p.phases();
    upstream
        .set(&control, plan[0].slots, plan[0].upstream)
        .await?;
    let sut = {
        let (p, variant, dir, url) = (
            p.clone(),
            variant.to_string(),
            dir.to_path_buf(),
            upstream.quote_url(),
        );
        tokio::task::spawn_blocking(move || SystemUnderTest::start(&p, &variant, &dir, &url))
            .await
            .map_err(|e| e.to_string())??
    };
    let base = sut.base_url();
    let http = loadgen::client(p.request_timeout_s)?;

    // Warm-up below the worker count, so FPM's "max active processes" still tells whether the
    // measured run ever used every worker.
    let wave = (p.workers as usize / 2).max(1);
    run.warmup = warm_up(&http, &base, 4, wave).await;
    if !run.warmup.contains("live") {
        return Err(format!(
            "warm-up got no live answer ({}); see {}/php-error.log",
            run.warmup,
            dir.display()
        ));
    }
    let total = p.total_secs();
    // Nothing is in flight now (the warm-up is over, the workers not started): the upstream's
    // rows and the extension's counters start from the same calls.
    upstream.reset(&control).await?;
    let _ = control
        .get(format!("{base}/lab-metrics?reset=1"))
        .send()
        .await;
    crate::two_hosts::reset_host_b_metrics(p, &control, &base).await;
    // Background workers (mixed): started a moment before t0 (PHP's start-up), calling from t0
    // (the same instant on the wall clock they read) until the end of the last phase.
    let (workers, t0, t0_unix_ms) = if p.scenario.has_background() {
        let lead = Duration::from_millis(300);
        let t0 = Instant::now() + lead;
        let from = unix_ms_now() + lead.as_secs_f64() * 1000.0;
        let w = Workers::start(p, variant, dir, &sut, from, from + total * 1000.0)?;
        tokio::time::sleep_until(t0).await;
        (Some(w), t0, from)
    } else {
        (None, Instant::now(), unix_ms_now())
    };
    let hard_end = t0 + Duration::from_secs_f64(total + p.drain_secs);
    let counters = Arc::new(Counters::default());
    let (tx, mut rx) = mpsc::unbounded_channel::<Record>();
    let stop = Arc::new(AtomicBool::new(false));
    let latest = Arc::new(Mutex::new(Sample::default()));

    let checkout = tokio::spawn(loadgen::open_loop(
        http.clone(),
        format!("{base}/checkout?postcode=10110"),
        Page::Checkout,
        p.rate,
        t0,
        total,
        hard_end,
        tx.clone(),
        counters.clone(),
    ));
    let health = tokio::spawn(loadgen::open_loop(
        http.clone(),
        format!("{base}/health"),
        Page::Health,
        p.health_rate,
        t0,
        total,
        hard_end,
        tx.clone(),
        Arc::new(Counters::default()),
    ));
    drop(tx);
    let sampler = tokio::spawn(sampler::run(
        control.clone(),
        base.clone(),
        upstream.clone(),
        t0,
        stop.clone(),
        latest.clone(),
        sut.shm_path.clone(),
    ));
    let progress = tokio::spawn(progress::run(
        p.clone(),
        variant.to_string(),
        t0,
        counters.clone(),
        latest.clone(),
        stop.clone(),
    ));
    // Whatever way this run ends (an error mid-run returns early), its tasks end with it.
    let _tasks = Tasks {
        stop: stop.clone(),
        handles: vec![
            checkout.abort_handle(),
            health.abort_handle(),
            sampler.abort_handle(),
            progress.abort_handle(),
        ],
    };

    // Phase switches, on schedule, while the load keeps going.
    for (k, phase) in plan.iter().enumerate().skip(1) {
        tokio::time::sleep_until(t0 + Duration::from_secs_f64(k as f64 * p.phase_secs)).await;
        upstream.set(&control, phase.slots, phase.upstream).await?;
        run.switches_s.push((Instant::now() - t0).as_secs_f64());
    }
    let scheduled =
        checkout.await.map_err(|e| e.to_string())? + health.await.map_err(|e| e.to_string())?;

    // Collect every record; each request ends by `hard_end`, so this finishes.
    while let Some(r) = rx.recv().await {
        run.records.push(r);
    }
    if run.records.len() as u64 != scheduled {
        return Err(format!(
            "lost records: {} of {scheduled}",
            run.records.len()
        ));
    }
    stop.store(true, Ordering::Relaxed);
    run.samples = sampler.await.map_err(|e| e.to_string())?;
    let _ = progress.await;
    run.fpm_final = sampler::fpm_status(&control, &base).await;
    if let Some(w) = workers {
        run.bg_calls =
            tokio::task::spawn_blocking(move || w.finish(Duration::from_secs(5), t0_unix_ms))
                .await
                .map_err(|e| e.to_string())?;
    }
    run.metrics = match control.get(format!("{base}/lab-metrics")).send().await {
        Ok(r) => r.json::<serde_json::Value>().await.ok(),
        Err(_) => None,
    };
    crate::two_hosts::add_host_b_metrics(p, &control, &base, &mut run.metrics).await;
    run.attempts = upstream.attempts(&control, t0_unix_ms).await?;
    drop(sut);
    Ok(())
}

/// The tasks of a variant's run: stopped and aborted when the run ends, also by an error in the
/// middle of it. Left running, a failed variant's load generator went on sending to its stopped
/// nginx, its progress line went on among the next variant's, and its sampler kept the
/// upstream simulator's process alive (its `Arc`) until the lab exited.
struct Tasks {
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::AbortHandle>,
}

impl Drop for Tasks {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in &self.handles {
            h.abort();
        }
    }
}

fn unix_ms_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0)
}

/// A few waves of requests before measuring (opcache, connections), counted by outcome.
async fn warm_up(http: &reqwest::Client, base: &str, waves: usize, wave: usize) -> String {
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    for _ in 0..waves {
        for (k, v) in warm_wave(http, base, wave).await {
            *counts.entry(k).or_default() += v;
        }
    }
    counts
        .iter()
        .map(|(k, v)| format!("{v}× {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn warm_wave(
    http: &reqwest::Client,
    base: &str,
    n: usize,
) -> std::collections::BTreeMap<String, u32> {
    let mut tasks = Vec::new();
    for _ in 0..n {
        let (http, url) = (http.clone(), format!("{base}/checkout?postcode=10110"));
        tasks.push(tokio::spawn(async move {
            match http.get(url).timeout(Duration::from_secs(10)).send().await {
                Ok(r) => {
                    let status = r.status().as_u16();
                    let body = r.text().await.unwrap_or_default();
                    match serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v.get("status")?.as_str().map(String::from))
                    {
                        Some(s) => s,
                        None => format!(
                            "HTTP {status} {}",
                            body.chars().take(120).collect::<String>()
                        ),
                    }
                }
                Err(e) => format!("error {e}"),
            }
        }));
    }
    let mut counts = std::collections::BTreeMap::<String, u32>::new();
    for t in tasks {
        *counts
            .entry(t.await.unwrap_or_else(|e| e.to_string()))
            .or_default() += 1;
    }
    counts
}

impl VariantRun {
    pub fn checkout(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.page == Page::Checkout)
    }
    pub fn health(&self) -> impl Iterator<Item = &Record> {
        self.records.iter().filter(|r| r.page == Page::Health)
    }
}

/// Live answer within `within` seconds.
pub fn is_good(r: &Record, within: f64) -> bool {
    r.outcome == Outcome::Live && r.latency_s.is_some_and(|l| l <= within)
}
