//! The upstream simulator (crates/upstream, `resilient-upstream`): a fresh process per variant,
//! switched between normal and slow through its control API, and its per-attempt rows read back
//! at the end (aligned to the lab's clock through their wall-clock stamps).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde::Deserialize;

use crate::procs::{free_port, wait_listening, Child};
use crate::scenario::UpstreamPhase;

/// One attempt as the upstream saw it, on the lab's clock (seconds since the variant's t0).
#[derive(Debug, Clone)]
pub struct UpstreamAttempt {
    pub arrival_s: f64,
    /// Got a slot (None: still queued at the end).
    pub start_s: Option<f64>,
    /// Slot freed.
    pub end_s: Option<f64>,
    /// The client had gone before the answer.
    pub gone: bool,
    /// The status answered (None: never answered).
    pub status: Option<u16>,
    /// Answered at once, without a slot or service: an outage's answer, or a 503 for an arrival
    /// over the admitted rate (the errors scenario).
    pub unserved: bool,
    /// Sent by a background worker (X-Request-Id `b-...`), not by the web page.
    pub background: bool,
    /// The call it belongs to (X-Request-Id, the same on every attempt of a call).
    pub call: Option<String>,
}

/// The row format of `GET /__control/sim/attempts?format=json` (fields the lab needs).
#[derive(Deserialize)]
struct SimRow {
    t_ms: f64,
    unix_ms: f64,
    start_ms: Option<f64>,
    end_ms: Option<f64>,
    gone_ms: Option<f64>,
    status: Option<u16>,
    #[serde(default)]
    queued: bool,
    request_id: Option<String>,
}

/// A running simulator.
pub struct Upstream {
    pub port: u16,
    _child: Child,
}

impl Upstream {
    pub fn start(bin: &Path, dir: &Path) -> Result<Upstream, String> {
        if !bin.exists() {
            return Err(format!(
                "{} not found (cargo build --release -p resilient-upstream)",
                bin.display()
            ));
        }
        let port = free_port()?;
        let mut cmd = Command::new(bin);
        cmd.args(["--listen", &format!("127.0.0.1:{port}")]);
        let mut child = Child::spawn("resilient-upstream", cmd, &dir.join("upstream.log"))?;
        wait_listening(&mut child, port, "upstream.log")?;
        Ok(Upstream {
            port,
            _child: child,
        })
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The URL the PHP app calls.
    pub fn quote_url(&self) -> String {
        format!("{}/sim/quote", self.base_url())
    }

    /// Sets capacity, service time, the share of 503 answers and the outage (at start and at
    /// phase boundaries).
    pub async fn set(
        &self,
        http: &reqwest::Client,
        capacity: u32,
        phase: UpstreamPhase,
    ) -> Result<(), String> {
        let r = http
            .post(format!("{}/__control/sim", self.base_url()))
            .json(
                &serde_json::json!({ "capacity": capacity, "service_ms": phase.service_ms,
                "fail_ratio": phase.fail_ratio, "outage": phase.outage,
                "shed_rps": phase.shed_rps }),
            )
            .send()
            .await
            .map_err(|e| format!("upstream control: {e}"))?;
        if !r.status().is_success() {
            return Err(format!(
                "upstream control: HTTP {}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ));
        }
        Ok(())
    }

    /// Forgets the rows and counters recorded so far (after warm-up).
    pub async fn reset(&self, http: &reqwest::Client) -> Result<(), String> {
        let r = http
            .post(format!("{}/__control/sim/reset", self.base_url()))
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if !r.status().is_success() {
            return Err(format!("upstream reset: HTTP {}", r.status()));
        }
        Ok(())
    }

    /// (in service, queued) right now.
    pub async fn level(&self, http: &reqwest::Client) -> Option<(u32, u32)> {
        let v: serde_json::Value = http
            .get(format!("{}/__control/stats", self.base_url()))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        let sim = v.get("sim")?;
        Some((
            sim.get("in_service")?.as_u64()? as u32,
            sim.get("queued")?.as_u64()? as u32,
        ))
    }

    /// Every attempt since the last reset, on the lab's clock (`t0_unix_ms` = the lab's t0).
    pub async fn attempts(
        &self,
        http: &reqwest::Client,
        t0_unix_ms: f64,
    ) -> Result<Vec<UpstreamAttempt>, String> {
        let rows: Vec<SimRow> = http
            .get(format!(
                "{}/__control/sim/attempts?format=json",
                self.base_url()
            ))
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .map_err(|e| format!("upstream attempts: {e}"))?
            .json()
            .await
            .map_err(|e| format!("upstream attempts: {e}"))?;
        // Monotonic ms since the upstream started → unix ms. One offset for all rows (the median
        // of the rows' own), so events at equal monotonic times stay equal after conversion.
        let mut offsets: Vec<f64> = rows.iter().map(|r| r.unix_ms - r.t_ms).collect();
        offsets.sort_by(f64::total_cmp);
        let offset = offsets.get(offsets.len() / 2).copied().unwrap_or(0.0);
        let lab = |t_ms: f64| (t_ms + offset - t0_unix_ms) / 1000.0;
        Ok(rows
            .iter()
            .map(|r| UpstreamAttempt {
                arrival_s: lab(r.t_ms),
                start_s: r.start_ms.map(lab),
                end_s: r.end_ms.map(lab),
                gone: r.gone_ms.is_some(),
                status: r.status,
                // A status, never queued, never served.
                unserved: r.status.is_some() && r.start_ms.is_none() && !r.queued,
                background: r
                    .request_id
                    .as_deref()
                    .is_some_and(|id| id.starts_with("b-")),
                call: r.request_id.clone(),
            })
            .collect())
    }
}
