//! The whole stack (reqwest transport, per-process runtime, real clock and sleeper) against the
//! real mock upstream on loopback. Timing assertions use the upstream's recorded arrival times.

#[path = "support/json.rs"]
mod json;

use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_http::process_io;
use resilient_http::{
    AttemptRecord, CallEnv, Caps, HttpClient, RequestOptions, SystemClock, TokioSleeper, Transport,
};
use resilient_upstream::Upstream;
use serde_json::{json, Value};

fn control(up: &Upstream, method: &str, path: &str, body: Option<Value>) -> Value {
    let io = process_io().unwrap();
    let url = up.url(path);
    io.block_on(async move {
        let client = reqwest::Client::new();
        let req = if method == "POST" {
            client.post(url).json(&body.unwrap_or(json!({})))
        } else {
            client.get(url)
        };
        let resp = req.send().await.unwrap();
        let status = resp.status();
        let v: Value = resp.json().await.unwrap();
        assert!(status.is_success(), "{v}");
        v
    })
}

fn script(up: &Upstream, key: &str, steps: Value) {
    control(
        up,
        "POST",
        "/__control/script",
        Some(json!({"key": key, "steps": steps})),
    );
}

fn rows(up: &Upstream, key: &str, min: usize) -> Vec<Value> {
    control(
        up,
        "GET",
        &format!("/__control/attempts?key={key}&min={min}&idle=1&timeout_ms=3000"),
        None,
    )
    .as_array()
    .unwrap()
    .clone()
}

fn client(up: &Upstream, key: &str, options: Value) -> HttpClient {
    let mut options = options;
    options["base_url"] = json!(up.key_url(key));
    real_client(&options, process_io().unwrap().transport())
}

/// A client on the real clock and sleeper over `transport`.
fn real_client(options: &Value, transport: Arc<dyn Transport>) -> HttpClient {
    let env = CallEnv::new(Arc::new(SystemClock), Arc::new(TokioSleeper), transport);
    HttpClient::new(json::config(options), Caps::default(), env)
}

/// Runs one call on the process runtime, collecting records as the driver hands them out,
/// with the time each arrived.
fn run(
    c: &HttpClient,
    method: &str,
    path: &str,
    opts: Value,
) -> (
    Result<resilient_http::Response, resilient_http::Unavailable>,
    Vec<(Instant, AttemptRecord)>,
) {
    let io = process_io().unwrap();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let env = c.env().clone().observer(Arc::new(tx));
    let req = c.prepare(method, path, json::request(&opts)).unwrap();
    let mut records = Vec::new();
    let out = io.drive(c.call(env, req, None), Some(rx), None, |wake| {
        let resilient_http::Wake::Record(r) = wake else {
            return true;
        };
        records.push((Instant::now(), r));
        true
    });
    (out.done().unwrap(), records)
}

#[test]
fn retry_after_is_obeyed_against_the_real_upstream_and_records_arrive_during_the_call() {
    let up = Upstream::start().unwrap();
    script(
        &up,
        "ra",
        json!([{"status": 429, "headers": {"Retry-After": "1"}}, {"status": 429, "headers": {"Retry-After": "1"}}, {"status": 200, "json": {"price": 42}}]),
    );
    let c = client(&up, "ra", json!({}));
    let started = Instant::now();
    let (r, records) = run(&c, "GET", "/quote", json!({"query": {"postcode": "10110"}}));
    let finished = Instant::now();
    let r = r.unwrap();
    assert_eq!((r.status(), r.attempts()), (200, 3));
    assert_eq!(r.json().unwrap()["price"], 42);
    let rows = rows(&up, "ra", 3);
    assert_eq!(rows.len(), 3);
    let t: Vec<f64> = rows.iter().map(|r| r["t_ms"].as_f64().unwrap()).collect();
    assert!(
        t[1] - t[0] >= 1000.0 && t[2] - t[1] >= 1000.0,
        "gaps {:?}",
        [t[1] - t[0], t[2] - t[1]]
    );
    assert_eq!(rows[0]["query"], "postcode=10110");
    // on_attempt semantics: the first record was handed out about a second before the end.
    assert_eq!(records.len(), 3);
    assert!(
        finished - records[0].0 >= Duration::from_millis(1900),
        "records must stream during the call"
    );
    assert!(records[0].0 - started < Duration::from_millis(500));
    assert_eq!(records[0].1.url, format!("{}/quote", up.key_url("ra")));
}

#[test]
fn a_hanging_upstream_ends_within_the_deadline() {
    let up = Upstream::start().unwrap();
    script(&up, "hang", json!([{"hang": true, "hang_ms": 10000}]));
    let c = client(&up, "hang", json!({"deadline": 0.5, "timeout": 10}));
    let started = Instant::now();
    let (r, records) = run(&c, "GET", "/slow", json!({}));
    let elapsed = started.elapsed();
    let e = r.unwrap_err();
    assert!(e.is_deadline_exceeded(), "{e}");
    // Ends at the deadline, not at the 10 s timeout (the upper bound only catches that: a
    // loaded machine may add a pause).
    assert!(
        elapsed >= Duration::from_millis(480) && elapsed < Duration::from_secs(2),
        "{elapsed:?}"
    );
    assert_eq!(records[0].1.error(), Some("timeout"));
}

#[test]
fn connection_errors_and_closed_connections_are_retried_and_reported() {
    let up = Upstream::start().unwrap();
    script(
        &up,
        "close",
        json!([{"close": true}, {"status": 200, "body": "ok"}]),
    );
    let c = client(&up, "close", json!({}));
    let (r, records) = run(&c, "GET", "/", json!({}));
    assert_eq!(r.unwrap().body(), b"ok");
    assert_eq!(records[0].1.error(), Some("closed"));

    // A port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut options = json!({"max_attempts": 2});
    options["base_url"] = json!(format!("http://127.0.0.1:{port}"));
    let c = real_client(&options, process_io().unwrap().transport());
    let (r, records) = run(&c, "GET", "/x?token=s3cret", json!({}));
    let e = r.unwrap_err();
    assert!(
        e.is_upstream_failed() && e.last_status() == 0 && e.attempts() == 2,
        "{e}"
    );
    assert!(!e.message().contains("s3cret"), "{e}");
    assert!(e.message().contains("connect error"), "{e}");
    assert_eq!(
        records.iter().map(|r| r.1.error()).collect::<Vec<_>>(),
        [Some("connect"), Some("connect")]
    );
}

#[test]
fn post_with_a_key_sends_the_same_key_and_body_on_every_attempt() {
    let up = Upstream::start().unwrap();
    script(
        &up,
        "idem",
        json!([{"status": 503}, {"status": 503}, {"status": 201, "body": "made"}]),
    );
    let c = client(
        &up,
        "idem",
        json!({"backoff": {"base": 0.001, "cap": 0.005}}),
    );
    let (r, _) = run(
        &c,
        "POST",
        "/quotes",
        json!({"json": {"sku": 1}, "idempotency_key": "order-42"}),
    );
    assert_eq!(r.unwrap().status(), 201);
    let rows = rows(&up, "idem", 3);
    assert_eq!(rows.len(), 3);
    for row in &rows {
        assert_eq!(row["headers"]["idempotency-key"], "order-42");
        assert_eq!(row["body"], "{\"sku\":1}");
        assert_eq!(row["method"], "POST");
    }
}

#[test]
fn pool_keeps_the_window_and_one_hang_holds_nobody_back() {
    let up = Upstream::start().unwrap();
    script(
        &up,
        "pool",
        json!([{"status": 200, "delay_ms": 50, "body": "ok"}]),
    );
    script(&up, "poolhang", json!([{"hang": true, "hang_ms": 5000}]));
    let c = client(&up, "pool", json!({"timeout": 2, "max_attempts": 1}));
    let mut requests: Vec<_> = (0..19)
        .map(|i| {
            c.prepare("GET", &format!("/sku/{i}"), RequestOptions::new())
                .unwrap()
        })
        .collect();
    requests.insert(
        3,
        c.prepare(
            "GET",
            &format!("{}/sku/slow", up.key_url("poolhang")),
            RequestOptions::new(),
        )
        .unwrap(),
    );
    let io = process_io().unwrap();
    let started = Instant::now();
    let (results, _) = io.block_on(c.pool(c.env().clone(), requests, 5, None));
    let elapsed = started.elapsed();
    assert_eq!(results.len(), 20);
    assert!(results[3].as_ref().unwrap_err().is_upstream_failed());
    assert!(results
        .iter()
        .enumerate()
        .all(|(i, r)| i == 3 || r.as_ref().unwrap().body() == b"ok"));
    let rows = rows(&up, "pool", 19);
    let max = rows
        .iter()
        .map(|r| r["max_concurrent"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!(max <= 4, "the hang holds one of 5 slots: {max}");
    let last_end = rows
        .iter()
        .map(|r| r["end_t_ms"].as_f64().unwrap())
        .fold(0.0, f64::max);
    let first = rows
        .iter()
        .map(|r| r["t_ms"].as_f64().unwrap())
        .fold(f64::MAX, f64::min);
    assert!(
        last_end - first < 1000.0,
        "the 19 others finished in {} ms",
        last_end - first
    );
    assert!(elapsed >= Duration::from_millis(1900), "{elapsed:?}");
}

#[test]
fn a_connection_the_server_closed_is_not_reused() {
    let up = Upstream::start().unwrap();
    let c = client(&up, "stale", json!({"max_attempts": 1}));
    let (r, _) = run(&c, "GET", "/a", json!({}));
    assert_eq!(r.unwrap().status(), 200);
    // Stop the server (closes every connection), start another on a new port: the pooled
    // connection to the old port is stale and must not be used for the old key's next call.
    let addr = up.addr();
    drop(up);
    std::thread::sleep(Duration::from_millis(50));
    let listener = std::net::TcpListener::bind(addr);
    if let Ok(listener) = listener {
        // Same port free again: a fresh server there must see a fresh connection work.
        drop(listener);
    }
    let (r, records) = run(&c, "GET", "/b", json!({}));
    // Either a clean connect error (nothing listens) — never a 'closed' error from a stale reuse.
    let e = r.unwrap_err();
    assert_eq!(records[0].1.error(), Some("connect"), "{e}");
}

#[test]
fn connections_are_kept_alive_and_reused() {
    let up = Upstream::start().unwrap();
    let c = client(&up, "ka", json!({}));
    let started = Instant::now();
    for _ in 0..200 {
        let (r, _) = run(&c, "GET", "/ping", json!({}));
        assert_eq!(r.unwrap().status(), 200);
    }
    let per_call = started.elapsed() / 200;
    eprintln!("sequential GET: {per_call:?} per call");
    // One connection, reused 200 times (other tests may keep theirs: count at least this one).
    assert!(process_io().unwrap().idle_connections() >= 1);
    assert!(per_call < Duration::from_millis(20), "{per_call:?}");
}

/// A server that answers one request per connection with keep-alive, then closes the idle
/// connection 50 ms later (as servers do after their keep-alive timeout) but keeps listening.
#[test]
fn an_idle_connection_closed_by_the_server_is_detected_before_reuse() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        for _ in 0..2 {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).unwrap();
            s.write_all(
                b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok",
            )
            .unwrap();
            std::thread::sleep(Duration::from_millis(50));
            drop(s); // idle close
        }
    });
    let c = real_client(
        &json!({"base_url": format!("http://127.0.0.1:{port}"), "max_attempts": 1}),
        process_io().unwrap().transport(),
    );
    let (r, _) = run(&c, "GET", "/1", json!({}));
    assert_eq!(r.unwrap().body(), b"ok");
    std::thread::sleep(Duration::from_millis(200));
    let (r, records) = run(&c, "GET", "/2", json!({}));
    assert_eq!(
        r.map(|r| r.body().to_vec()).map_err(|e| e.to_string()),
        Ok(b"ok".to_vec()),
        "{records:?}"
    );
    server.join().unwrap();
}

/// The reqwest transport (https, proxies) against the same upstream: answers, Retry-After, hang.
#[test]
fn the_reqwest_transport_follows_the_same_rules() {
    let up = Upstream::start().unwrap();
    script(
        &up,
        "rq",
        json!([{"status": 503, "headers": {"Retry-After": "0"}}, {"status": 200, "body": "ok"}]),
    );
    script(&up, "rqhang", json!([{"hang": true, "hang_ms": 5000}]));
    let transport = Arc::new(resilient_http::ReqwestTransport::new());
    let make = |key: &str, options: Value| {
        let mut options = options;
        options["base_url"] = json!(up.key_url(key));
        real_client(&options, transport.clone())
    };
    let c = make("rq", json!({}));
    let (r, records) = run(&c, "GET", "/x?a=1", json!({"headers": {"X-T": "1"}}));
    assert_eq!(
        (r.as_ref().unwrap().status(), r.unwrap().attempts()),
        (200, 2)
    );
    assert_eq!(records.len(), 2);
    let rows = rows(&up, "rq", 2);
    assert_eq!(
        (
            rows[0]["query"].as_str(),
            rows[0]["headers"]["x-t"].as_str()
        ),
        (Some("a=1"), Some("1"))
    );
    let c = make("rqhang", json!({"deadline": 0.3, "timeout": 5}));
    let started = Instant::now();
    let (r, _) = run(&c, "GET", "/", json!({}));
    assert!(r.unwrap_err().is_deadline_exceeded());
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "at the deadline, not the 5 s timeout"
    );
}

/// A raw server for one request, answering `answer` byte for byte (what the mock upstream
/// cannot send): its port, and the thread to join.
fn answer_once(answer: Vec<u8>) -> (u16, std::thread::JoinHandle<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut socket, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf).unwrap();
        let _ = socket.write_all(&answer);
    });
    (port, server)
}

#[test]
fn response_header_bytes_that_are_not_utf8_are_kept_as_received() {
    let (port, server) = answer_once(
        b"HTTP/1.1 200 OK\r\nX-Latin: caf\xe9\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
            .to_vec(),
    );
    let io = process_io().unwrap();
    let c = real_client(
        &json!({"base_url": format!("http://127.0.0.1:{port}")}),
        io.transport(),
    );
    let req = c.prepare("GET", "/latin", RequestOptions::new()).unwrap();
    let r = io.block_on(c.call(c.env().clone(), req, None)).unwrap();
    server.join().unwrap();
    assert_eq!(r.header("x-latin").as_deref(), Some(b"caf\xe9".as_slice()));
    assert_eq!(r.body(), b"ok");
}

/// A response with more header fields than the transport takes (reqwest keeps hyper's 100)
/// fails the attempt as `other` (docs/http-limits.md), not as a closed connection.
#[test]
fn too_many_response_headers_are_an_other_failure_on_the_reqwest_transport() {
    let mut answer = String::from("HTTP/1.1 200 OK\r\n");
    for i in 0..150 {
        answer.push_str(&format!("X-H{i}: v\r\n"));
    }
    answer.push_str("Content-Length: 2\r\nConnection: close\r\n\r\nok");
    let (port, server) = answer_once(answer.into_bytes());
    let c = real_client(
        &json!({"base_url": format!("http://127.0.0.1:{port}"), "max_attempts": 1}),
        Arc::new(resilient_http::ReqwestTransport::new()),
    );
    let (r, _) = run(&c, "GET", "/many", json!({}));
    server.join().unwrap();
    let e = r.unwrap_err();
    assert_eq!(
        e.last_failure(),
        Some(resilient_http::FailureKind::Other),
        "{e}"
    );
}

/// `max_body` on both transports: a body announced too long is refused before reading, a
/// chunked or endless one is cut at the limit; one attempt each (never retried); the limit fits.
#[test]
fn max_body_is_enforced_while_reading_on_both_transports() {
    let up = Upstream::start().unwrap();
    for (path, stream) in [
        ("/announced", json!({"bytes": 300_000_000u64})),
        (
            "/chunked",
            json!({"bytes": 300_000_000u64, "chunked": true}),
        ),
        ("/endless", json!({})),
        ("/fits", json!({"bytes": 65_536})),
    ] {
        control(
            &up,
            "POST",
            "/__control/script",
            Some(json!({"key": "mb", "path": path, "steps": [{"stream": stream}]})),
        );
    }
    let lean = process_io().unwrap().transport();
    let reqwest: Arc<dyn resilient_http::Transport> =
        Arc::new(resilient_http::ReqwestTransport::new());
    for transport in [lean, reqwest] {
        let c = real_client(
            &json!({"base_url": up.key_url("mb"), "max_body": 65_536}),
            transport,
        );
        for path in ["/announced", "/chunked", "/endless"] {
            let (r, records) = run(&c, "GET", path, json!({}));
            let e = r.unwrap_err();
            assert!(e.is_upstream_failed(), "{e}");
            assert_eq!(e.attempts(), 1, "{e}");
            assert!(e.message().contains("max_body (65536 bytes)"), "{e}");
            assert_eq!(records[0].1.error(), Some("too_large"));
        }
        let (r, _) = run(&c, "GET", "/fits", json!({}));
        assert_eq!(r.unwrap().body().len(), 65_536);
    }
}

/// The head of one request, read raw off the socket by a one-shot server that answers `ok`.
fn request_head_as_sent(transport: Arc<dyn Transport>, options: Value) -> String {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut head = Vec::new();
        let mut buf = [0u8; 4096];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the request ended before its head");
            head.extend_from_slice(&buf[..n]);
        }
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
            .unwrap();
        String::from_utf8(head).unwrap()
    });
    let c = real_client(
        &json!({"base_url": format!("http://127.0.0.1:{port}"), "max_attempts": 1}),
        transport,
    );
    let (r, _) = run(&c, "POST", "/h", options);
    assert_eq!(r.unwrap().body(), b"ok");
    server.join().unwrap()
}

/// Header names go out as Guzzle's and curl's common ones do (`Content-Type`, `X-Api-Key`), not
/// in lower case: servers that match names case-sensitively (old SOAP stacks, appliances) exist.
/// hyper keeps no case given, so names are title-cased (`SOAPAction` goes as `Soapaction`).
#[test]
fn header_names_are_sent_title_cased_over_http1() {
    let options = json!({"json": {"a": 1}, "headers": {"x-api-key": "k", "SOAPAction": "urn:x"}});
    for transport in [
        process_io().unwrap().transport(),
        Arc::new(resilient_http::ReqwestTransport::new()) as Arc<dyn Transport>,
    ] {
        let head = request_head_as_sent(transport, options.clone());
        for line in [
            "\r\nContent-Type: application/json\r\n",
            "\r\nX-Api-Key: k\r\n",
            "\r\nSoapaction: urn:x\r\n",
            "\r\nHost: 127.0.0.1:",
        ] {
            assert!(head.contains(line), "{line:?} in {head}");
        }
        // One Accept, as curl sends it, whichever transport.
        assert_eq!(head.matches("\r\nAccept: */*\r\n").count(), 1, "{head}");
    }
}
