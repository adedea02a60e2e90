//! The mock upstream seen from a real TCP client: scripts, hangs, closes, recorded attempts.

mod common;

use std::io::Read;
use std::thread;
use std::time::{Duration, Instant};

use common::{attempts, get, post_json, script, Conn};
use resilient_upstream::Upstream;
use serde_json::json;

#[test]
fn scripted_sequence_then_repeat_last() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "seq", "steps": [
            {"status": 429, "headers": {"Retry-After": "2"}, "body": "slow down"},
            {"status": 503},
            {"status": 200, "json": {"ok": true}}
        ]}),
    );
    let mut c = Conn::open(a);
    let r1 = c.call("GET", "/k/seq/quote", &[], b"");
    assert_eq!(
        (r1.status, r1.header("retry-after"), r1.text().as_str()),
        (429, Some("2"), "slow down")
    );
    assert_eq!(r1.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(c.call("GET", "/k/seq/quote", &[], b"").status, 503);
    let r3 = c.call("GET", "/k/seq/quote", &[], b"");
    assert_eq!((r3.status, r3.json()), (200, json!({"ok": true})));
    assert_eq!(r3.header("content-type"), Some("application/json"));
    assert_eq!(
        c.call("GET", "/k/seq/quote", &[], b"").status,
        200,
        "repeat_last"
    );
    let steps: Vec<_> = attempts(a, "seq", "")
        .iter()
        .map(|r| r["step"].as_u64().unwrap())
        .collect();
    assert_eq!(steps, [0, 1, 2, 2]);
}

#[test]
fn cycle_and_echo_after_the_steps() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "cy", "then": "cycle", "steps": [{"status": 500}, {"status": 201}]}),
    );
    script(
        a,
        json!({"key": "ec", "then": "echo", "steps": [{"status": 503}]}),
    );
    let got: Vec<u16> = (0..5).map(|_| get(a, "/k/cy/x").status).collect();
    assert_eq!(got, [500, 201, 500, 201, 500]);
    assert_eq!(get(a, "/k/ec/x").status, 503);
    let echo = get(a, "/k/ec/x?postcode=10110");
    assert_eq!(echo.status, 200);
    let body = echo.json();
    assert_eq!(
        (
            body["path"].as_str(),
            body["query"].as_str(),
            body["seq"].as_u64()
        ),
        (Some("/x"), Some("postcode=10110"), Some(2))
    );
}

#[test]
fn unscripted_key_echoes_without_secrets() {
    let up = Upstream::start().unwrap();
    let r = Conn::open(up.addr()).call(
        "GET",
        "/k/plain/a/b?x=1",
        &[("Authorization", "Bearer t0p"), ("Idempotency-Key", "ik-1")],
        b"",
    );
    assert_eq!(r.status, 200);
    let body = r.json();
    assert_eq!(body["method"], "GET");
    assert_eq!(body["path"], "/a/b");
    assert_eq!(body["headers"]["idempotency-key"], "ik-1");
    assert!(
        !r.text().contains("t0p"),
        "the echo must not repeat secrets: {}",
        r.text()
    );
}

#[test]
fn attempts_keep_every_header_verbatim_and_the_body() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    let secret = "Bearer a+b/c==;x=\"y\"";
    let mut c = Conn::open(a);
    for _ in 0..2 {
        c.call(
            "POST",
            "/k/hdr/quotes?sku=1",
            &[
                ("Authorization", secret),
                ("Idempotency-Key", "same-key"),
                ("X-Multi", "one"),
                ("X-Multi", "two"),
            ],
            br#"{"sku":1}"#,
        );
    }
    let rows = attempts(a, "hdr", "");
    assert_eq!(rows.len(), 2);
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r["seq"], i as u64 + 1);
        assert_eq!(r["method"], "POST");
        assert_eq!(r["path"], "/quotes");
        assert_eq!(r["query"], "sku=1");
        assert_eq!(r["uri"], "/k/hdr/quotes?sku=1");
        assert_eq!(r["headers"]["authorization"], secret);
        assert_eq!(r["headers"]["idempotency-key"], "same-key");
        assert_eq!(r["headers"]["x-multi"], "one, two");
        assert_eq!(r["body_len"], 9);
        assert_eq!(r["body"], r#"{"sku":1}"#);
        assert_eq!(r["outcome"], "answered");
        assert_eq!(r["status"], 200);
    }
    assert!(rows[1]["t_ms"].as_f64() > rows[0]["t_ms"].as_f64());
}

#[test]
fn concurrency_at_arrival_and_delays_are_measured() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "conc", "steps": [{"status": 200, "delay_ms": 400}]}),
    );
    let clients: Vec<_> = (0..3)
        .map(|_| thread::spawn(move || Conn::open(a).call("GET", "/k/conc/q", &[], b"").status))
        .collect();
    for c in clients {
        assert_eq!(c.join().unwrap(), 200);
    }
    let rows = attempts(a, "conc", "");
    let conc: Vec<u64> = rows
        .iter()
        .map(|r| r["concurrent_at_arrival"].as_u64().unwrap())
        .collect();
    // The three overlap (each waits 400 ms), so the k-th arrival finds k in flight.
    assert_eq!(conc, [1, 2, 3]);
    assert_eq!(rows[2]["max_concurrent"], 3);
    for r in &rows {
        assert!(r["duration_ms"].as_f64().unwrap() >= 400.0, "{r}");
    }
    // A later lone request sees only itself, while the running max stays.
    get(a, "/k/conc/q");
    let last = attempts(a, "conc", "").pop().unwrap();
    assert_eq!(
        (
            last["concurrent_at_arrival"].as_u64(),
            last["max_concurrent"].as_u64()
        ),
        (Some(1), Some(3))
    );
}

#[test]
fn hang_sends_nothing_and_records_the_client_leaving() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(a, json!({"key": "hang", "steps": [{"hang": true}]}));
    let mut c = Conn::open(a);
    c.stream()
        .set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    c.send("GET", "/k/hang/q", &[], b"");
    let mut buf = [0u8; 1];
    let err = c
        .stream()
        .try_clone()
        .unwrap()
        .read(&mut buf)
        .expect_err("no byte may arrive");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
        "{err:?}"
    );
    drop(c);
    let rows = attempts(a, "hang", "idle=1&timeout_ms=5000");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["outcome"], "abandoned");
    assert!(rows[0]["status"].is_null());
    assert!(
        rows[0]["duration_ms"].as_f64().unwrap() >= 300.0,
        "{}",
        rows[0]
    );
}

#[test]
fn hang_limit_closes_the_connection() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "hl", "steps": [{"hang": true, "hang_ms": 200}]}),
    );
    let mut c = Conn::open(a);
    let t = Instant::now();
    c.send("GET", "/k/hl/q", &[], b"");
    assert!(c.read().is_err(), "closed without a response");
    assert!(t.elapsed() >= Duration::from_millis(200));
    assert_eq!(attempts(a, "hl", "idle=1")[0]["outcome"], "closed");
}

#[test]
fn close_drops_the_connection_without_a_byte() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "cl", "steps": [{"close": true, "delay_ms": 50}, {"status": 200}]}),
    );
    let mut c = Conn::open(a);
    c.send("GET", "/k/cl/q", &[], b"");
    let mut rest = Vec::new();
    let n = c
        .stream()
        .try_clone()
        .unwrap()
        .read_to_end(&mut rest)
        .expect("EOF, not a timeout");
    assert_eq!(n, 0, "got bytes: {:?}", String::from_utf8_lossy(&rest));
    assert_eq!(
        get(a, "/k/cl/q").status,
        200,
        "the next request gets the next step"
    );
    let rows = attempts(a, "cl", "idle=1");
    assert_eq!(
        (rows[0]["outcome"].as_str(), rows[1]["outcome"].as_str()),
        (Some("closed"), Some("answered"))
    );
}

#[test]
fn keep_alive_serves_several_requests_on_one_connection() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    let mut c = Conn::open(a);
    let local = c.stream().local_addr().unwrap();
    for i in 1..=3 {
        let r = c.call("GET", "/k/ka/x", &[], b"");
        assert_eq!((r.status, r.json()["seq"].as_u64()), (200, Some(i)));
    }
    assert_eq!(c.stream().local_addr().unwrap(), local);
    assert_eq!(attempts(a, "ka", "").len(), 3);
}

#[test]
fn keys_are_independent_and_reset_separately() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "a", "steps": [{"status": 503}, {"status": 200}]}),
    );
    script(a, json!({"key": "b", "steps": [{"status": 404}]}));
    assert_eq!(get(a, "/k/b/x").status, 404);
    assert_eq!(get(a, "/k/a/x").status, 503);
    assert_eq!(get(a, "/k/b/x").status, 404);
    assert_eq!(get(a, "/k/a/x").status, 200);
    assert_eq!(attempts(a, "a", "").len(), 2);
    assert_eq!(attempts(a, "b", "").len(), 2);
    assert_eq!(
        post_json(a, "/__control/reset?key=a", json!({})).status,
        200
    );
    assert_eq!(attempts(a, "a", "").len(), 0);
    assert_eq!(
        get(a, "/k/a/x").status,
        200,
        "the reset key lost its script: echo"
    );
    assert_eq!(attempts(a, "b", "").len(), 2, "other keys untouched");
    assert_eq!(get(a, "/k/b/x").status, 404);
}

#[test]
fn waiting_for_attempts_returns_when_they_arrive() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    let late = thread::spawn(move || {
        thread::sleep(Duration::from_millis(150));
        get(a, "/k/late/x").status
    });
    let rows = attempts(a, "late", "min=1&timeout_ms=5000");
    assert_eq!(rows.len(), 1);
    assert_eq!(late.join().unwrap(), 200);
    let r = get(a, "/__control/attempts?key=never&min=1&timeout_ms=50");
    assert_eq!(r.header("x-wait-satisfied"), Some("false"));
    assert_eq!(r.json(), json!([]));
}

#[test]
fn drip_sends_the_body_slowly() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "drip", "steps": [{"body": "abcdef", "drip": {"chunk_bytes": 2, "interval_ms": 100}}]}),
    );
    let t = Instant::now();
    let r = get(a, "/k/drip/x");
    assert_eq!(r.text(), "abcdef");
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "3 chunks, 100 ms before each"
    );
    let row = &attempts(a, "drip", "idle=1")[0];
    assert_eq!(row["outcome"], "answered");
    assert!(row["duration_ms"].as_f64().unwrap() >= 300.0);
}

#[test]
fn control_rejects_mistakes_with_a_reason() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    let r = post_json(
        a,
        "/__control/script",
        json!({"key": "x", "steps": [{"stauts": 200}]}),
    );
    assert_eq!(r.status, 400);
    assert!(r.text().contains("stauts"), "{}", r.text());
    let r = post_json(
        a,
        "/__control/script",
        json!({"key": "x", "steps": [{"status": 42}]}),
    );
    assert_eq!(r.status, 400);
    assert!(r.text().contains("steps[0]"), "{}", r.text());
    assert_eq!(
        post_json(a, "/__control/script", json!({"key": "", "steps": [{}]})).status,
        400
    );
    assert_eq!(get(a, "/__control/attempts").status, 400);
    assert_eq!(get(a, "/__control/nope").status, 404);
    assert_eq!(get(a, "/__control/script").status, 405);
}

#[test]
fn a_path_script_overrides_the_key_script_for_that_path_only() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    script(
        a,
        json!({"key": "pool", "steps": [{"status": 200, "delay_ms": 100}]}),
    );
    script(
        a,
        json!({"key": "pool", "path": "/slow", "steps": [{"hang": true, "hang_ms": 2000}]}),
    );
    let slow = thread::spawn(move || {
        let mut c = Conn::open(a);
        c.stream()
            .set_read_timeout(Some(Duration::from_millis(1000)))
            .unwrap();
        c.send("GET", "/k/pool/slow", &[], b"");
        c.read().is_err()
    });
    let fast: Vec<_> = (0..4)
        .map(|i| thread::spawn(move || get(a, &format!("/k/pool/sku/{i}")).status))
        .collect();
    for f in fast {
        assert_eq!(f.join().unwrap(), 200);
    }
    assert!(slow.join().unwrap(), "the /slow request got no answer");
    let rows = attempts(a, "pool", "idle=1");
    assert_eq!(rows.len(), 5, "one log per key, whatever the path");
    let slow_row = rows.iter().find(|r| r["path"] == "/slow").unwrap();
    assert_eq!(slow_row["outcome"], "abandoned");
    assert!(rows
        .iter()
        .filter(|r| r["path"] != "/slow")
        .all(|r| r["status"] == 200));
    assert!(
        rows.iter()
            .map(|r| r["max_concurrent"].as_u64().unwrap())
            .max()
            >= Some(2)
    );
}

#[test]
fn a_big_multipart_body_is_read_as_a_stream_and_digested_per_part() {
    let up = Upstream::start().unwrap();
    let a = up.addr();
    // 20 MB: more than the control API reads into memory; the mock digests it as it streams.
    let file: Vec<u8> = (0..20_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let mut body = Vec::new();
    body.extend_from_slice(
        b"--b0undary\r\nContent-Disposition: form-data; name=\"note\"\r\n\r\nhi\r\n",
    );
    body.extend_from_slice(
        b"--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f.bin\"\r\n",
    );
    body.extend_from_slice(b"Content-Type: application/octet-stream\r\n\r\n");
    body.extend_from_slice(&file);
    body.extend_from_slice(b"\r\n--b0undary--\r\n");
    let r = Conn::open(a).call(
        "POST",
        "/k/multi/upload",
        &[("Content-Type", "multipart/form-data; boundary=b0undary")],
        &body,
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let rows = attempts(a, "multi", "min=1");
    let row = &rows[0];
    let digest = |bytes: &[u8]| {
        let mut d = resilient_upstream::received::Fnv1a64::default();
        d.update(bytes);
        d.hex()
    };
    assert_eq!(row["body_len"], body.len() as u64);
    assert_eq!(row["body_fnv1a64"], digest(&body));
    assert!(!row["body"].as_str().unwrap().is_empty());
    let parts = row["parts"].as_array().expect("parts");
    assert_eq!(parts.len(), 2);
    assert_eq!(parts[0]["name"], "note");
    assert_eq!(parts[0]["value"], "hi");
    assert_eq!(parts[1]["name"], "file");
    assert_eq!(parts[1]["filename"], "f.bin");
    assert_eq!(
        parts[1]["headers"]["content-type"],
        "application/octet-stream"
    );
    assert_eq!(parts[1]["len"], file.len() as u64);
    assert_eq!(parts[1]["fnv1a64"], digest(&file));
}
