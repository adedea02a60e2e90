//! The lab's upstream simulator: slots, FIFO queue, run-time settings, and the rule that a
//! request whose client left still occupies its slot.

mod common;

use std::thread;
use std::time::{Duration, Instant};

use common::{get, post_json, Conn};
use resilient_upstream::{SimConfig, Upstream};
use serde_json::{json, Value};

fn sim_rows(a: std::net::SocketAddr) -> Vec<Value> {
    get(a, "/__control/sim/attempts?format=json")
        .json()
        .as_array()
        .unwrap()
        .clone()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn wait_completed(a: std::net::SocketAddr, n: u64) -> Value {
    let t = Instant::now();
    loop {
        let s = get(a, "/__control/stats").json();
        if s["sim"]["completed"].as_u64() >= Some(n) || t.elapsed() > Duration::from_secs(10) {
            return s;
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn at_most_capacity_in_service_and_the_rest_wait_in_order() {
    let up = Upstream::start_with(SimConfig {
        capacity: 2,
        service_ms: 150,
        ..SimConfig::default()
    })
    .unwrap();
    let a = up.addr();
    let clients: Vec<_> = (0..6)
        .map(|i| {
            thread::spawn(move || {
                Conn::open(a).call(
                    "GET",
                    "/sim/quote?postcode=10110",
                    &[("X-Request-Id", &format!("r{i}"))],
                    b"",
                )
            })
        })
        .collect();
    for c in clients {
        let r = c.join().unwrap();
        assert_eq!(r.status, 200);
        assert!(r.json()["quote"].is_number());
    }
    let stats = get(a, "/__control/stats").json();
    assert_eq!(stats["sim"]["max_in_service"], 2);
    assert_eq!(stats["sim"]["completed"], 6);
    let rows = sim_rows(a);
    assert_eq!(rows.len(), 6);
    // FIFO: service starts in arrival order, and never more than 2 overlap.
    for w in rows.windows(2) {
        assert!(
            f(&w[1]["start_ms"]) >= f(&w[0]["start_ms"]),
            "{} then {}",
            w[0],
            w[1]
        );
    }
    for r in &rows[2..] {
        assert_eq!(r["queued"], true);
        let overlapping = rows
            .iter()
            .filter(|o| {
                f(&o["start_ms"]) <= f(&r["start_ms"]) && f(&o["end_ms"]) > f(&r["start_ms"])
            })
            .count();
        assert!(
            overlapping <= 2,
            "{overlapping} in service at {}",
            r["start_ms"]
        );
    }
    for r in &rows {
        assert!(f(&r["end_ms"]) - f(&r["start_ms"]) >= 150.0);
    }
    // Six requests, two at a time, 150 ms each: the last ends at least 450 ms after the first start.
    let first = rows
        .iter()
        .map(|r| f(&r["start_ms"]))
        .fold(f64::MAX, f64::min);
    let last = rows.iter().map(|r| f(&r["end_ms"])).fold(0.0, f64::max);
    assert!(last - first >= 450.0, "{}", last - first);
    let timeline = get(a, "/__control/timeline?bucket_ms=50").json();
    let buckets = timeline["buckets"].as_array().unwrap();
    assert_eq!(
        buckets
            .iter()
            .map(|b| b["arrivals"].as_u64().unwrap())
            .sum::<u64>(),
        6
    );
    assert_eq!(
        buckets
            .iter()
            .map(|b| b["completed"].as_u64().unwrap())
            .sum::<u64>(),
        6
    );
    assert_eq!(
        buckets
            .iter()
            .map(|b| b["max_in_service"].as_u64().unwrap())
            .max(),
        Some(2)
    );
    let max_queue = buckets
        .iter()
        .map(|b| b["max_queue"].as_u64().unwrap())
        .max()
        .unwrap();
    assert_eq!(max_queue, stats["sim"]["max_queue"].as_u64().unwrap());
    assert!(max_queue >= 1);
}

#[test]
fn a_request_whose_client_left_still_occupies_its_slot() {
    let up = Upstream::start_with(SimConfig {
        capacity: 1,
        service_ms: 300,
        ..SimConfig::default()
    })
    .unwrap();
    let a = up.addr();
    let mut quitter = Conn::open(a);
    let sent = Instant::now();
    quitter.send("GET", "/sim/quote", &[("X-Request-Id", "quitter")], b"");
    while get(a, "/__control/stats").json()["sim"]["in_service"] != 1 {
        assert!(sent.elapsed() < Duration::from_secs(5), "never in service");
        thread::sleep(Duration::from_millis(5));
    }
    drop(quitter);
    let r = Conn::open(a).call(
        "GET",
        "/sim/quote",
        &[("X-Request-Id", "patient"), ("X-Attempt", "1")],
        b"",
    );
    assert_eq!(r.status, 200);
    // The slot frees only when the quitter's 300 ms are served, then the patient's own 300
    // (counted from the quitter's send, so however long this thread took to get here).
    let waited = sent.elapsed();
    assert!(
        waited >= Duration::from_millis(600),
        "answered only {waited:?} after the quitter's send"
    );
    let rows = sim_rows(a);
    let (q, p) = (&rows[0], &rows[1]);
    assert_eq!(
        (
            q["request_id"].as_str(),
            p["request_id"].as_str(),
            p["attempt"].as_str()
        ),
        (Some("quitter"), Some("patient"), Some("1"))
    );
    assert!(
        q["gone_ms"].is_number(),
        "the server noticed the client leaving: {q}"
    );
    assert!(f(&q["gone_ms"]) < f(&q["end_ms"]));
    assert!(
        f(&q["end_ms"]) - f(&q["start_ms"]) >= 300.0,
        "served in full although nobody waits"
    );
    assert!(
        f(&p["start_ms"]) >= f(&q["end_ms"]),
        "the patient one waited for the abandoned work"
    );
    assert!(p["gone_ms"].is_null());
    let stats = wait_completed(a, 2);
    assert_eq!(
        (
            stats["sim"]["client_gone"].as_u64(),
            stats["sim"]["completed_after_gone"].as_u64()
        ),
        (Some(1), Some(1))
    );
}

#[test]
fn settings_change_at_run_time() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    assert_eq!(
        get(a, "/__control/sim").json(),
        json!({"capacity": 4, "service_ms": 20, "fail_ratio": 0.0, "fail_status": 503, "outage": false, "shed_rps": 0.0})
    );
    let r = post_json(a, "/__control/sim", json!({"service_ms": 120}));
    assert_eq!(r.json()["service_ms"], 120);
    assert_eq!(
        r.json()["capacity"],
        4,
        "fields not named keep their values"
    );
    assert_eq!(get(a, "/sim/quote").json()["service_ms"], 120);
    post_json(
        a,
        "/__control/sim",
        json!({"service_ms": 20, "fail_ratio": 1.0, "fail_status": 500}),
    );
    let r = get(a, "/sim/quote");
    assert_eq!(r.status, 500);
    let rows = sim_rows(a);
    assert!(f(&rows[0]["end_ms"]) - f(&rows[0]["start_ms"]) >= 120.0);
    assert!(rows[0]["status"] == 200 && rows[1]["status"] == 500);
    assert_eq!(
        post_json(a, "/__control/sim", json!({"capacity": 0})).status,
        400
    );
    assert_eq!(
        post_json(a, "/__control/sim", json!({"shed_rps": -1.0})).status,
        400
    );
    assert_eq!(
        post_json(a, "/__control/sim", json!({"capacty": 2})).status,
        400
    );
}

#[test]
fn raising_capacity_admits_queued_requests_at_once() {
    let up = Upstream::start_with(SimConfig {
        capacity: 1,
        service_ms: 1000,
        ..SimConfig::default()
    })
    .unwrap();
    let a = up.addr();
    let clients: Vec<_> = (0..3)
        .map(|_| thread::spawn(move || get(a, "/sim/x").status))
        .collect();
    let t = Instant::now();
    while get(a, "/__control/stats").json()["sim"]["queued"] != 2 {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "requests never queued"
        );
        thread::sleep(Duration::from_millis(10));
    }
    post_json(a, "/__control/sim", json!({"capacity": 3}));
    let s = get(a, "/__control/stats").json();
    assert_eq!(
        (s["sim"]["in_service"].as_u64(), s["sim"]["queued"].as_u64()),
        (Some(3), Some(0))
    );
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
}

#[test]
fn csv_export_reset_and_incremental_reads() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    for i in 0..3 {
        Conn::open(a).call(
            "GET",
            "/sim/q",
            &[("X-Request-Id", &format!("id,{i}\"")), ("X-Attempt", "2")],
            b"",
        );
    }
    let csv = get(a, "/__control/sim/attempts").text();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines[0], resilient_upstream::control::SIM_CSV_HEADER);
    assert_eq!(lines.len(), 4);
    let cols = lines[0].split(',').count();
    assert!(
        lines[1..].iter().all(|l| l.split(',').count() == cols),
        "ids are sanitized: {csv}"
    );
    assert!(lines[1].ends_with(",0,id0,2"), "{}", lines[1]);
    let later: Vec<u64> = get(a, "/__control/sim/attempts?format=json&since=2")
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(later, [3]);
    post_json(a, "/__control/reset", json!({}));
    assert_eq!(get(a, "/__control/sim/attempts").text().lines().count(), 1);
    assert_eq!(get(a, "/__control/stats").json()["sim"]["arrivals"], 0);
    get(a, "/sim/q");
    assert_eq!(sim_rows(a)[0]["seq"], 4, "seq keeps counting across resets");
}

/// An outage answers every request with `fail_status` at once: no slot, no service time, no
/// queue, while work already in service runs to its end; when it ends, service resumes.
#[test]
fn an_outage_answers_at_once_without_a_slot_then_service_resumes() {
    let up = Upstream::start_with(SimConfig {
        capacity: 1,
        service_ms: 400,
        ..SimConfig::default()
    })
    .unwrap();
    let a = up.addr();
    // One request in service when the outage starts: it keeps its slot and is served.
    let busy = thread::spawn(move || get(a, "/sim/q").status);
    let t = Instant::now();
    while get(a, "/__control/stats").json()["sim"]["in_service"] != 1 {
        assert!(t.elapsed() < Duration::from_secs(5), "never in service");
        thread::sleep(Duration::from_millis(5));
    }
    post_json(a, "/__control/sim", json!({"outage": true}));
    let t = Instant::now();
    for i in 0..5 {
        let r = Conn::open(a).call("GET", "/sim/q", &[("X-Request-Id", &format!("o{i}"))], b"");
        assert_eq!(r.status, 503);
        assert_eq!(r.json()["error"], "simulated outage");
    }
    assert!(
        t.elapsed() < Duration::from_millis(300),
        "answered at once, not after the busy slot's 400 ms: {:?}",
        t.elapsed()
    );
    let s = get(a, "/__control/stats").json();
    assert_eq!(
        (
            s["sim"]["outage_answered"].as_u64(),
            s["sim"]["queued"].as_u64(),
            s["sim"]["max_queue"].as_u64()
        ),
        (Some(5), Some(0), Some(0))
    );
    assert_eq!(busy.join().unwrap(), 200, "the work in service was served");
    post_json(
        a,
        "/__control/sim",
        json!({"outage": false, "service_ms": 20}),
    );
    assert_eq!(get(a, "/sim/q").status, 200);
    let rows = sim_rows(a);
    assert_eq!(rows.len(), 7);
    for r in &rows[1..6] {
        assert_eq!(r["status"], 503);
        assert!(
            r["start_ms"].is_null() && r["end_ms"].is_null() && r["queued"] == false,
            "{r}"
        );
    }
    assert!(rows[0]["end_ms"].is_number() && rows[6]["end_ms"].is_number());
    // The timeline counts the outage answers as arrivals, never as queued or in service.
    let timeline = get(a, "/__control/timeline?bucket_ms=50").json();
    let buckets = timeline["buckets"].as_array().unwrap();
    assert_eq!(
        buckets
            .iter()
            .map(|b| b["arrivals"].as_u64().unwrap())
            .sum::<u64>(),
        7
    );
    assert!(buckets
        .iter()
        .all(|b| b["max_in_service"].as_u64() <= Some(1) && b["max_queue"] == 0));
}

/// Shedding: at most `shed_rps` requests a second are admitted (a bucket of 100 ms of them, at
/// least one, full when shedding starts); the others are answered `fail_status` at once, without
/// a slot, so whoever sends more gets more of them.
#[test]
fn over_the_shed_rate_requests_are_answered_at_once_without_a_slot() {
    let up = Upstream::start_with(SimConfig {
        capacity: 4,
        service_ms: 1,
        ..SimConfig::default()
    })
    .unwrap();
    let a = up.addr();
    post_json(a, "/__control/sim", json!({"shed_rps": 5.0}));
    let t = Instant::now();
    let statuses: Vec<u16> = (0..10).map(|_| get(a, "/sim/q").status).collect();
    let elapsed = t.elapsed();
    let admitted = statuses.iter().filter(|&&s| s == 200).count();
    let shed = statuses.iter().filter(|&&s| s == 503).count();
    assert_eq!(admitted + shed, 10, "{statuses:?}");
    // One token in the bucket, then one every 200 ms.
    let most = 1 + (elapsed.as_secs_f64() * 5.0) as usize;
    assert!(
        (1..=most).contains(&admitted),
        "{admitted} admitted in {elapsed:?}: {statuses:?}"
    );
    assert_eq!(statuses[0], 200, "the bucket starts full");
    let s = get(a, "/__control/stats").json();
    assert_eq!(s["sim"]["shed_answered"].as_u64(), Some(shed as u64));
    assert_eq!(s["sim"]["outage_answered"].as_u64(), Some(0));
    let rows = sim_rows(a);
    let shed_rows: Vec<_> = rows.iter().filter(|r| r["status"] == 503).collect();
    assert_eq!(shed_rows.len(), shed);
    assert!(shed_rows
        .iter()
        .all(|r| r["start_ms"].is_null() && r["queued"] == false));
    let r = get(a, "/sim/q");
    if r.status == 503 {
        assert_eq!(r.json()["error"], "shed: over the admitted rate");
    }
    thread::sleep(Duration::from_millis(250));
    assert_eq!(get(a, "/sim/q").status, 200, "a token every 200 ms");
    post_json(a, "/__control/sim", json!({"shed_rps": 0.0}));
    assert!((0..10).all(|_| get(a, "/sim/q").status == 200), "off again");
}

#[test]
fn a_timeline_of_more_buckets_than_one_answer_holds_is_refused() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    let max = resilient_upstream::timeline::MAX_BUCKETS;
    let r = get(
        a,
        &format!(
            "/__control/timeline?bucket_ms=1&from_ms=0&to_ms={}",
            max + 1
        ),
    );
    let start: String = r.text().chars().take(200).collect();
    assert_eq!(r.status, 400, "{start}");
    assert!(r.text().contains("bucket_ms"), "{start}");
    // As many as it holds: every one, at the bucket size asked for.
    let r = get(
        a,
        &format!("/__control/timeline?bucket_ms=1&from_ms=0&to_ms={max}&format=csv"),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(
        r.text().lines().count(),
        max + 1,
        "header and {max} buckets"
    );
}
