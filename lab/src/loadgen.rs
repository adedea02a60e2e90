//! The open-loop load generator: requests leave on a fixed schedule (i / rate seconds after t0),
//! each in its own task, whatever earlier requests are doing — so a slow system gets the same
//! offered load as a fast one (seed 000: "ยิง 50 ครั้งต่อวินาทีตลอด", k6's constant-arrival-rate).
//! Every request ends by a fixed instant (end of the run + drain), so the run always finishes.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Which page a request asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Page {
    Checkout,
    Health,
}

/// What the page answered.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", content = "detail", rename_all = "lowercase")]
pub enum Outcome {
    /// /checkout: a live quote. /health: served (200).
    Live,
    /// /checkout: a refusal or give-up with the fallback estimate; the page's reason.
    Fallback(String),
    /// Anything else: non-200, unparsable body, transport error, no answer by the end.
    Error(String),
}

/// One request.
#[derive(Debug, Clone, Serialize)]
pub struct Record {
    pub page: Page,
    /// When the schedule said to send it (seconds since t0).
    pub scheduled_s: f64,
    /// When it was actually sent.
    pub sent_s: f64,
    /// Time to the full answer; None when there was none.
    pub latency_s: Option<f64>,
    /// HTTP status, 0 without an answer.
    pub http_status: u16,
    pub outcome: Outcome,
}

/// Live totals for the progress line.
#[derive(Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub done: AtomicU64,
    pub live: AtomicU64,
    pub fallback: AtomicU64,
    pub errors: AtomicU64,
}

impl Counters {
    pub fn pending(&self) -> u64 {
        self.sent
            .load(Relaxed)
            .saturating_sub(self.done.load(Relaxed))
    }
}

/// Sends `rate` requests per second to `url` from t0 for `secs` seconds; each request gives up at
/// `hard_end` at the latest. Records go to `tx`. Returns how many were scheduled.
#[allow(clippy::too_many_arguments)]
pub async fn open_loop(
    http: reqwest::Client,
    url: String,
    page: Page,
    rate: f64,
    t0: Instant,
    secs: f64,
    hard_end: Instant,
    tx: mpsc::UnboundedSender<Record>,
    counters: Arc<Counters>,
) -> u64 {
    let n = (rate * secs).round() as u64;
    for i in 0..n {
        let scheduled_s = i as f64 / rate;
        let due = t0 + Duration::from_secs_f64(scheduled_s);
        tokio::time::sleep_until(due).await;
        let sent = Instant::now();
        let sent_s = (sent - t0).as_secs_f64();
        if page == Page::Checkout {
            counters.sent.fetch_add(1, Relaxed);
        }
        let (http, url, tx, counters) = (http.clone(), url.clone(), tx.clone(), counters.clone());
        tokio::spawn(async move {
            let answer = tokio::time::timeout_at(hard_end, fetch(&http, &url)).await;
            // From when the request was due, not when it left: a generator that fell behind
            // adds its lag to the latencies instead of hiding it (coordinated omission).
            let latency = due.elapsed().as_secs_f64();
            let (http_status, outcome, latency_s) = match answer {
                Err(_) => (
                    0,
                    Outcome::Error("no answer by the end of the run".into()),
                    None,
                ),
                Ok(Err(e)) => (0, Outcome::Error(e), None),
                Ok(Ok((status, body))) => (status, classify(page, status, &body), Some(latency)),
            };
            if page == Page::Checkout {
                counters.done.fetch_add(1, Relaxed);
                match &outcome {
                    Outcome::Live => &counters.live,
                    Outcome::Fallback(_) => &counters.fallback,
                    Outcome::Error(_) => &counters.errors,
                }
                .fetch_add(1, Relaxed);
            }
            let _ = tx.send(Record {
                page,
                scheduled_s,
                sent_s,
                latency_s,
                http_status,
                outcome,
            });
        });
    }
    n
}

async fn fetch(http: &reqwest::Client, url: &str) -> Result<(u16, String), String> {
    let r = http.get(url).send().await.map_err(error_kind)?;
    let status = r.status().as_u16();
    let body = r.text().await.map_err(error_kind)?;
    Ok((status, body))
}

fn error_kind(e: reqwest::Error) -> String {
    if e.is_timeout() {
        "client timeout".into()
    } else if e.is_connect() {
        "connect error".into()
    } else {
        format!("transport error: {e}")
    }
}

/// Reads the page's answer: /checkout says `{"status":"live"|"fallback","reason":..}`.
fn classify(page: Page, status: u16, body: &str) -> Outcome {
    match (page, status) {
        (Page::Health, 200) => Outcome::Live,
        (Page::Health, s) => Outcome::Error(format!("HTTP {s}")),
        (Page::Checkout, 200) => {
            let v: serde_json::Value = match serde_json::from_str(body) {
                Ok(v) => v,
                Err(_) => return Outcome::Error("HTTP 200, body not JSON".into()),
            };
            match v.get("status").and_then(|s| s.as_str()) {
                Some("live") => Outcome::Live,
                Some("fallback") => Outcome::Fallback(
                    v.get("reason")
                        .and_then(|r| r.as_str())
                        .unwrap_or("?")
                        .to_string(),
                ),
                other => Outcome::Error(format!("HTTP 200, status {other:?}")),
            }
        }
        (Page::Checkout, s) => Outcome::Error(format!("HTTP {s}")),
    }
}

/// The client the load generator uses: no proxy, no pool limit, one connection per concurrent
/// request (HTTP/1.1 keep-alive), a generous per-request timeout.
pub fn client(timeout_s: f64) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(4096)
        .timeout(Duration::from_secs_f64(timeout_s))
        .build()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classify_reads_the_pages_answer() {
        assert_eq!(
            classify(Page::Checkout, 200, r#"{"status":"live"}"#),
            Outcome::Live
        );
        assert_eq!(
            classify(
                Page::Checkout,
                200,
                r#"{"status":"fallback","reason":"budget"}"#
            ),
            Outcome::Fallback("budget".into())
        );
        assert!(matches!(
            classify(Page::Checkout, 200, "<html>"),
            Outcome::Error(_)
        ));
        assert!(matches!(
            classify(Page::Checkout, 502, ""),
            Outcome::Error(_)
        ));
        assert_eq!(classify(Page::Health, 200, "ok"), Outcome::Live);
    }

    /// Against a server that accepts and never answers, the generator still sends on schedule:
    /// the proof that it is open loop.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sends_on_schedule_when_nothing_answers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let hold = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((s, _)) = listener.accept().await {
                held.push(s);
            }
        });
        let (tx, mut rx) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let t0 = Instant::now();
        let hard_end = t0 + Duration::from_millis(900);
        let url = format!("http://127.0.0.1:{port}/checkout");
        let n = open_loop(
            client(30.0).unwrap(),
            url,
            Page::Checkout,
            100.0,
            t0,
            0.5,
            hard_end,
            tx,
            counters.clone(),
        )
        .await;
        assert_eq!(n, 50);
        // All 50 were sent before any answered (none ever does).
        assert_eq!(counters.sent.load(Relaxed), 50);
        assert_eq!(counters.done.load(Relaxed), 0);
        let mut records = Vec::new();
        while let Some(r) = rx.recv().await {
            records.push(r);
        }
        hold.abort();
        assert_eq!(records.len(), 50);
        for r in &records {
            assert!(matches!(r.outcome, Outcome::Error(_)));
            assert!(
                r.sent_s - r.scheduled_s < 0.05,
                "sent {:.3} s late",
                r.sent_s - r.scheduled_s
            );
        }
    }
}
