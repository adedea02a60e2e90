//! The control API under `/__control/...`: scripts, recorded attempts, resets, simulator
//! settings, timeline and stats. Everything is JSON except the compact CSV exports.

use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::http::{HeaderValue, Method, Request, Response, StatusCode};
use serde_json::json;

use crate::body::{self, HandlerResult, OutBody};
use crate::mock::read_body;
use crate::query;
use crate::script::{Script, ScriptRequest};
use crate::sim::{SimRow, SimUpdate};
use crate::timeline;
use crate::App;

/// Longest a `GET /__control/attempts?min=..|idle=1` may wait.
const MAX_WAIT: Duration = Duration::from_secs(60);
/// Longest key accepted.
const MAX_KEY_LEN: usize = 200;

/// Serves `/__control{sub}`.
pub async fn handle(app: Arc<App>, sub: &str, req: Request<Incoming>) -> HandlerResult {
    let pairs = query::parse(req.uri().query());
    let method = req.method().clone();
    let r = match (&method, sub) {
        (&Method::POST, "/script") => set_script(&app, req).await,
        (&Method::GET, "/attempts") => attempts(&app, &pairs).await,
        (&Method::POST, "/reset") => reset(&app, &pairs),
        (&Method::GET, "/sim") => body::json(StatusCode::OK, &app.sim.config()),
        (&Method::POST, "/sim") => update_sim(&app, req).await,
        (&Method::POST, "/sim/reset") => {
            app.sim.reset(app.clock.t_ms());
            ok()
        }
        (&Method::GET, "/sim/attempts") => sim_attempts(&app, &pairs),
        (&Method::GET, "/timeline") => timeline(&app, &pairs),
        (&Method::GET, "/stats") => body::json(
            StatusCode::OK,
            &json!({ "t_ms": app.clock.t_ms(), "unix_ms": app.clock.unix_ms(), "sim": app.sim.stats(), "mock": app.keys.summary() }),
        ),
        (&Method::GET, "/health") => ok(),
        (
            _,
            "/script" | "/attempts" | "/reset" | "/sim" | "/sim/reset" | "/sim/attempts"
            | "/timeline" | "/stats" | "/health",
        ) => body::error(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("{method} not allowed on /__control{sub}"),
        ),
        _ => body::error(
            StatusCode::NOT_FOUND,
            format!("unknown control endpoint /__control{sub}"),
        ),
    };
    Ok(r)
}

fn ok() -> Response<OutBody> {
    body::json(StatusCode::OK, &json!({ "ok": true }))
}

fn bad(message: impl Into<String>) -> Response<OutBody> {
    body::error(StatusCode::BAD_REQUEST, message)
}

async fn read_json<T: serde::de::DeserializeOwned>(
    req: Request<Incoming>,
) -> Result<T, Response<OutBody>> {
    let bytes = read_body(req.into_body())
        .await
        .map_err(|_| bad("could not read the request body"))?;
    serde_json::from_slice(&bytes).map_err(|e| bad(format!("invalid JSON: {e}")))
}

fn check_key(key: &str) -> Result<(), String> {
    if key.is_empty() || key.len() > MAX_KEY_LEN || key.contains('/') {
        return Err(format!(
            "key must be 1..={MAX_KEY_LEN} characters without '/'"
        ));
    }
    Ok(())
}

async fn set_script(app: &App, req: Request<Incoming>) -> Response<OutBody> {
    let r: ScriptRequest = match read_json(req).await {
        Ok(r) => r,
        Err(resp) => return resp,
    };
    if let Err(e) = check_key(&r.key) {
        return bad(e);
    }
    if r.path.as_deref().is_some_and(|p| !p.starts_with('/')) {
        return bad("path must start with '/'");
    }
    let steps = r.steps.len();
    match Script::new(r.steps, r.then) {
        Ok(script) => {
            app.keys.set_script(&r.key, r.path.clone(), script);
            body::json(
                StatusCode::OK,
                &json!({ "ok": true, "key": r.key, "path": r.path, "steps": steps }),
            )
        }
        Err(e) => bad(e),
    }
}

async fn attempts(app: &App, pairs: &[(String, String)]) -> Response<OutBody> {
    let Some(key) = query::get(pairs, "key") else {
        return bad("key is required: /__control/attempts?key=...");
    };
    if let Err(e) = check_key(key) {
        return bad(e);
    }
    let min = match query::get(pairs, "min").map(str::parse::<u64>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return bad("min must be a whole number"),
    };
    let idle = matches!(query::get(pairs, "idle"), Some("1" | "true"));
    let timeout = match query::get(pairs, "timeout_ms").map(str::parse::<u64>) {
        None => Duration::from_secs(5),
        Some(Ok(ms)) => Duration::from_millis(ms).min(MAX_WAIT),
        Some(Err(_)) => return bad("timeout_ms must be a whole number"),
    };
    let state = app.keys.get(key);
    let satisfied = if min > 0 || idle {
        state.wait(min, idle, timeout).await
    } else {
        true
    };
    let mut r = body::json(StatusCode::OK, &state.rows());
    r.headers_mut().insert(
        "x-wait-satisfied",
        HeaderValue::from_static(if satisfied { "true" } else { "false" }),
    );
    r
}

fn reset(app: &App, pairs: &[(String, String)]) -> Response<OutBody> {
    match query::get(pairs, "key") {
        Some(key) => app.keys.reset(Some(key)),
        None => {
            app.keys.reset(None);
            app.sim.reset(app.clock.t_ms());
        }
    }
    ok()
}

async fn update_sim(app: &App, req: Request<Incoming>) -> Response<OutBody> {
    let u: SimUpdate = match read_json(req).await {
        Ok(u) => u,
        Err(resp) => return resp,
    };
    match app.sim.update(u) {
        Ok(config) => body::json(StatusCode::OK, &config),
        Err(e) => bad(e),
    }
}

/// Column order of the CSV export.
pub const SIM_CSV_HEADER: &str =
    "seq,t_ms,unix_ms,start_ms,end_ms,gone_ms,status,queue_at_arrival,in_service_at_arrival,queued,request_id,attempt";

fn sim_attempts(app: &App, pairs: &[(String, String)]) -> Response<OutBody> {
    let since = match query::get(pairs, "since").map(str::parse::<u64>) {
        None => 0,
        Some(Ok(n)) => n,
        Some(Err(_)) => return bad("since must be a whole number"),
    };
    let rows = app.sim.rows_since(since);
    match query::get(pairs, "format").unwrap_or("csv") {
        "json" => body::json(StatusCode::OK, &rows),
        "csv" => body::with_type(StatusCode::OK, "text/csv", sim_csv(&rows)),
        other => bad(format!("format must be csv or json, not {other:?}")),
    }
}

fn sim_csv(rows: &[SimRow]) -> String {
    let mut out = String::with_capacity(64 + rows.len() * 96);
    out.push_str(SIM_CSV_HEADER);
    out.push('\n');
    let t = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_default();
    for r in rows {
        let _ = writeln!(
            out,
            "{},{:.3},{:.3},{},{},{},{},{},{},{},{},{}",
            r.seq,
            r.t_ms,
            r.unix_ms,
            t(r.start_ms),
            t(r.end_ms),
            t(r.gone_ms),
            r.status.map(|s| s.to_string()).unwrap_or_default(),
            r.queue_at_arrival,
            r.in_service_at_arrival,
            r.queued as u8,
            r.request_id.as_deref().unwrap_or(""),
            r.attempt.as_deref().unwrap_or(""),
        );
    }
    out
}

fn timeline(app: &App, pairs: &[(String, String)]) -> Response<OutBody> {
    let num = |name: &str, default: f64| -> Result<f64, String> {
        match query::get(pairs, name).map(str::parse::<f64>) {
            None => Ok(default),
            Some(Ok(v)) if v.is_finite() => Ok(v),
            _ => Err(format!("{name} must be a number")),
        }
    };
    let (bucket_ms, from_ms, to_ms) = match (
        num("bucket_ms", 100.0),
        num("from_ms", app.sim.since_ms()),
        num("to_ms", app.clock.t_ms()),
    ) {
        (Ok(b), Ok(f), Ok(t)) => (b, f, t),
        (Err(e), _, _) | (_, Err(e), _) | (_, _, Err(e)) => return bad(e),
    };
    if bucket_ms < 1.0 {
        return bad("bucket_ms must be at least 1");
    }
    let n = timeline::bucket_count(from_ms, to_ms, bucket_ms);
    if n > timeline::MAX_BUCKETS as f64 {
        return bad(format!(
            "{n} buckets of bucket_ms {bucket_ms} from {from_ms} to {to_ms}: at most {} in one answer (a larger bucket_ms or a shorter span)",
            timeline::MAX_BUCKETS
        ));
    }
    let rows = app.sim.rows_since(0);
    let buckets = timeline::build(&rows, from_ms, to_ms, bucket_ms);
    match query::get(pairs, "format").unwrap_or("json") {
        "json" => body::json(
            StatusCode::OK,
            &json!({ "bucket_ms": bucket_ms, "from_ms": from_ms, "to_ms": to_ms, "buckets": buckets }),
        ),
        "csv" => {
            let mut out = String::from("t_ms,arrivals,started,completed,failed,gone,completed_after_gone,max_in_service,max_queue\n");
            for b in &buckets {
                let _ = writeln!(
                    out,
                    "{:.3},{},{},{},{},{},{},{},{}",
                    b.t_ms,
                    b.arrivals,
                    b.started,
                    b.completed,
                    b.failed,
                    b.gone,
                    b.completed_after_gone,
                    b.max_in_service,
                    b.max_queue
                );
            }
            body::with_type(StatusCode::OK, "text/csv", out)
        }
        other => bad(format!("format must be csv or json, not {other:?}")),
    }
}
