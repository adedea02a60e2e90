//! A burst to one https origin over HTTP/1.1 (a `pool()` of 100, or 100 FPM-style calls at
//! once) opens a connection per request in flight. Once the burst is over, the process must
//! not keep all of them idle: each is a file descriptor here and a connection the upstream
//! holds open, for reqwest's 60 s idle timeout. The plain-HTTP transport keeps at most 32 idle
//! per host; the https one keeps the same. Its own binary: the process's clients hold only
//! this test's connections.

#[path = "support/drive.rs"]
mod drive;
#[path = "support/h1_tls.rs"]
mod h1_tls;
#[path = "support/json.rs"]
mod json;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use resilient_http::process_io;
use serde_json::json;

/// Requests in flight at once, each answered after `ANSWER_AFTER`: they overlap, so each
/// needs a connection of its own.
const BURST: usize = 100;
const ANSWER_AFTER: Duration = Duration::from_millis(200);
/// The idle connections kept per host (the plain transport's `MAX_IDLE_PER_HOST`).
const IDLE_PER_HOST: usize = 32;

#[test]
fn idle_connections_to_one_https_origin_stay_bounded_after_a_burst() {
    let (ports, open) = h1_tls::serve(1, ANSWER_AFTER);
    let io = process_io().unwrap();
    let client = h1_tls::client(io, ports[0]);
    let requests = (0..BURST)
        .map(|i| {
            client
                .prepare("GET", &format!("/item/{i}"), json::request(&json!({})))
                .unwrap()
        })
        .collect();
    let out = io.drive(
        client.pool(client.env().clone(), requests, BURST, None),
        None,
        None,
        |_| true,
    );
    let (results, _) = out.done().unwrap();
    for result in &results {
        let response = result.as_ref().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status(), 200);
    }
    let opened = open.accepted.load(Ordering::SeqCst);
    assert!(
        opened > IDLE_PER_HOST,
        "the burst overlapped on only {opened} connections: nothing to bound"
    );
    // A connection goes back to the pool (where the bound applies) on the process's runtime,
    // which runs while a call is driven: the burst's last ones may go back only with the next
    // call, as in a PHP process, whose next call settles them.
    let next = drive::call(io, &client, "GET", "/next", &json!({}));
    assert_eq!(next.unwrap_or_else(|e| panic!("{e}")).status(), 200);
    // The server's threads read the closes as they get to them: wait for up to 10 s.
    let until = Instant::now() + Duration::from_secs(10);
    while open.open.load(Ordering::SeqCst) > IDLE_PER_HOST && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let still_open = open.open.load(Ordering::SeqCst);
    eprintln!("after a burst of {BURST} on {opened} connections: {still_open} still open");
    assert!(
        still_open <= IDLE_PER_HOST,
        "{still_open} idle connections kept to one origin after a burst of {BURST}"
    );
}
