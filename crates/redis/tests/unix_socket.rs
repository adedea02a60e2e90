//! A `unix://` Redis that stops accepting connections (stopped, frozen, swapping) keeps every
//! connect that gave up in its socket's queue; once that queue is full, a connect waits there
//! for as long as Redis does not accept, whatever time it was given. Every call must still end
//! within its wait.

mod common;
use common::*;

use std::process::Command;
use std::time::{Duration, Instant};

use resilient_http::OnBackendError;

fn signal(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args([&format!("-{signal}"), &pid.to_string()])
        .status()
        .is_ok_and(|s| s.success());
    assert!(sent, "kill -{signal} {pid}");
}

/// Redis stopped with a queue of 2 (`tcp-backlog` sizes the unix socket's too): six processes'
/// first connects (six backends here, each with its connection to make) each end within their
/// 100 ms wait, the queue full after the third. The server is woken after 4 s whatever happens,
/// so that a connect left waiting shows as a call of seconds instead of a test that hangs.
#[test]
fn a_connect_to_a_full_unix_socket_queue_ends_within_its_wait() {
    let socket =
        std::env::temp_dir().join(format!("resilient-redis-unix-{}.sock", std::process::id()));
    let socket = socket.to_str().unwrap().to_owned();
    let redis = RedisServer::start_with(&["--unixsocket", &socket, "--tcp-backlog", "2"]);
    let url = |prefix: &str| format!("unix://{socket}?prefix={prefix}&timeout=0.1");

    let warm = backend(&url("u0:"), OnBackendError::Closed, 1, "u0");
    let f = web_funnel(&warm, "up", 8, Duration::from_secs(10));
    drop(until_ok("Redis answers on its unix socket", || {
        f.admit(1, now_ms())
    }));

    let pid = redis.pid();
    signal(pid, "STOP");
    let wake = std::thread::spawn(move || {
        std::thread::park_timeout(Duration::from_secs(4));
        signal(pid, "CONT");
    });
    let mut took = Vec::new();
    for i in 1..=6 {
        let tag = format!("u{i}");
        let b = backend(&url(&format!("{tag}:")), OnBackendError::Open, 1, &tag);
        let f = web_funnel(&b, "up", 8, Duration::from_secs(10));
        let started = Instant::now();
        let _ = f.admit(1, now_ms());
        took.push(started.elapsed());
    }
    wake.thread().unpark();
    wake.join().unwrap();
    let _ = std::fs::remove_file(&socket);
    assert!(
        took.iter().all(|t| *t < Duration::from_secs(1)),
        "each admission's connect ends within its 100 ms wait (and some slack): {took:?}"
    );
}
