//! A long-running process that calls many https origins once each (a queue worker delivering
//! webhooks to `https://{tenant}.api…`) must not keep a connection, and its file descriptor, to
//! every one of them: reqwest keeps each origin's idle connection for 60 s, and only while a
//! call drives the runtime, so such a process ran out of descriptors ("Too many open files",
//! for its own `fopen` too). Its own binary: the process's clients hold only this test's
//! connections, and `/proc/self/fd` counts only this test's descriptors.

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

/// Origins called: well past the distinct origins the process's shared clients serve together
/// before one is replaced (128).
const ORIGINS: usize = 300;
/// What the process may hold after calling them: the origins of the clients kept, and a few
/// more (the runtime's own descriptors).
const HELD_AT_MOST: usize = 128 + 16;

/// This process's open file descriptors.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn connections_to_many_https_origins_stay_bounded() {
    let (ports, open) = h1_tls::serve(ORIGINS, Duration::ZERO);
    let io = process_io().unwrap();
    let before = open_fds();
    for port in &ports {
        // A client per call, as a PHP script makes one: they share the process's clients.
        let client = h1_tls::client(io, *port);
        let response =
            drive::call(io, &client, "GET", "/hook", &json!({})).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(response.status(), 200);
    }
    // The servers' threads read the closes as they get to them: wait for up to 10 s.
    let until = Instant::now() + Duration::from_secs(10);
    while open.open.load(Ordering::SeqCst) > HELD_AT_MOST && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(10));
    }
    let still_open = open.open.load(Ordering::SeqCst);
    let held = open_fds().saturating_sub(before);
    eprintln!("after {ORIGINS} origins: {still_open} connections open, {held} more descriptors");
    assert!(
        still_open <= HELD_AT_MOST,
        "{still_open} connections still open at the servers after calling {ORIGINS} origins"
    );
    // Both ends of each connection are this process's: the client's end and the server's.
    assert!(
        held <= 2 * HELD_AT_MOST,
        "{held} more descriptors open after calling {ORIGINS} origins"
    );
}
