//! Test shorthand: a client configuration and request options written as `json!` trees, read
//! through the crate's public setters (a test's mistake panics here; the rules are the
//! setters', tested in the crate).
#![allow(dead_code)]

use std::time::Duration;

use resilient_http::{Body, CircuitOptions, ClientConfig, FunnelOptions, RequestOptions};
use serde_json::Value;

fn secs(v: &Value) -> Duration {
    Duration::from_secs_f64(v.as_f64().expect("seconds"))
}

fn count(v: &Value) -> u32 {
    v.as_u64().expect("count") as u32
}

fn entries(v: &Value) -> Vec<(&String, &Value)> {
    v.as_object()
        .map(|m| m.iter().collect())
        .unwrap_or_default()
}

/// `{"base_url", "timeout", "connect_timeout", "deadline", "max_attempts", "backoff",
/// "retry_on", "max_retry_after", "max_body", "funnel" (its "limit" a count or "auto"),
/// "circuit" (failure_ratio, min_calls, window, open_for), "budget", "headers"}`.
pub fn config(options: &Value) -> ClientConfig {
    let mut c = ClientConfig::default();
    for (key, v) in entries(options) {
        match key.as_str() {
            "base_url" => c.set_base_url(v.as_str().unwrap()).unwrap(),
            "timeout" => c.set_timeout(secs(v)).unwrap(),
            "connect_timeout" => c.set_connect_timeout(secs(v)).unwrap(),
            "deadline" => c.set_deadline(Some(secs(v))).unwrap(),
            "max_attempts" => c.set_max_attempts(count(v)).unwrap(),
            "backoff" => c.set_backoff(secs(&v["base"]), secs(&v["cap"])).unwrap(),
            "retry_on" => {
                let statuses: Vec<i64> = v
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_i64().unwrap())
                    .collect();
                c.set_retry_on(&statuses).unwrap()
            }
            "max_retry_after" => c.set_max_retry_after(secs(v)),
            "max_body" => c.set_max_body(v.as_u64().unwrap()).unwrap(),
            "funnel" => c
                .set_funnel(Some(FunnelOptions {
                    // `"auto"`: learned within the defaults (1..64, from 4).
                    limit: if v["limit"] == "auto" {
                        64
                    } else {
                        count(&v["limit"])
                    },
                    auto: (v["limit"] == "auto")
                        .then(|| resilient_core::AdaptiveConfig::new(1, 64, 4).unwrap()),
                    reserve: v.get("reserve").map_or(0, count),
                    lease: v.get("lease").map(secs),
                    wait: v.get("wait").map_or(Duration::ZERO, secs),
                    share: v.get("share").is_some_and(|s| s == &Value::Bool(true)),
                }))
                .unwrap(),
            "circuit" => c
                .set_circuit(Some(CircuitOptions {
                    failure_ratio: v["failure_ratio"].as_f64().unwrap(),
                    min_calls: count(&v["min_calls"]),
                    window: secs(&v["window"]),
                    open_for: secs(&v["open_for"]),
                    consecutive_failures: None,
                }))
                .unwrap(),
            "budget" if v == &Value::Bool(false) => c.set_budget(None),
            "budget" => c.set_budget(Some(
                resilient_core::BudgetConfig::new(
                    v["ratio"].as_f64().unwrap(),
                    count(&v["floor"]),
                    secs(&v["window"]),
                )
                .unwrap(),
            )),
            "headers" => {
                for (name, value) in entries(v) {
                    c.add_header(
                        "headers",
                        name.as_bytes(),
                        value.as_str().unwrap().as_bytes(),
                    )
                    .unwrap()
                }
            }
            other => panic!("test config: unknown key {other}"),
        }
    }
    c
}

/// `{"query": {name: scalar}, "json": any, "body": "text", "headers": {name: "v"},
/// "idempotency_key": "k", "timeout": seconds}`.
pub fn request(options: &Value) -> RequestOptions {
    let mut r = RequestOptions::new();
    for (key, v) in entries(options) {
        r = match key.as_str() {
            "query" => entries(v).into_iter().fold(r, |r, (k, v)| match v {
                Value::String(s) => r.query(k.as_str(), s.as_str()),
                other => r.query(k.as_str(), other.to_string()),
            }),
            "json" => r.body(Body::Json(serde_json::to_vec(v).unwrap())).unwrap(),
            "body" => r
                .body(Body::Raw(v.as_str().unwrap().as_bytes().to_vec()))
                .unwrap(),
            "headers" => entries(v).into_iter().fold(r, |r, (k, v)| {
                r.header(k, v.as_str().unwrap().as_bytes()).unwrap()
            }),
            "idempotency_key" => r.idempotency_key(v.as_str().unwrap()).unwrap(),
            "timeout" => r.timeout(secs(v)).unwrap(),
            other => panic!("test request: unknown key {other}"),
        };
    }
    r
}
