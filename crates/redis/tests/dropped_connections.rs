//! A connection the server's end dropped while this process was not using it (Redis's idle
//! `timeout`, a restart, a proxy) is opened again, not taken for an unreachable Redis: no
//! fallback decision (when the drop is seen before a command is written), and no back-off.

mod common;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

/// How many clients Redis has connected (redis-cli's own included).
fn clients(redis: &RedisServer) -> String {
    redis
        .cli(&["INFO", "clients"])
        .lines()
        .find_map(|l| l.strip_prefix("connected_clients:"))
        .unwrap_or("?")
        .trim()
        .to_owned()
}

#[test]
fn a_connection_the_server_closed_while_idle_is_opened_again_without_a_fallback() {
    let redis = RedisServer::start();
    assert_eq!(redis.cli(&["CONFIG", "SET", "timeout", "1"]), "OK");
    // `closed`: an admission is granted only when Redis granted it.
    let b = backend(&redis.url("d1:"), OnBackendError::Closed, 1, "d1");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(10));
    drop(f.admit(1, now_ms()).unwrap());
    until_ok("Redis kept our idle connection", || {
        match clients(&redis).as_str() {
            "1" => Ok(()), // redis-cli's own
            n => Err(n.to_owned()),
        }
    });

    let permit = f.admit(1, now_ms());
    assert!(
        permit.is_ok(),
        "fell back: the closed connection was taken for an unreachable Redis"
    );
    assert_eq!(
        redis.cli(&["ZCARD", "d1:{up}:funnel"]),
        "1",
        "released before"
    );
}

/// Dropped while in use (a restart between two commands): the command that finds it dropped
/// falls back (Redis may have read it), but the next one connects again at once.
#[test]
fn a_connection_dropped_by_a_restart_costs_one_decision_and_no_back_off() {
    let mut redis = RedisServer::start();
    let b = backend(&redis.url("d2:"), OnBackendError::Closed, 1, "d2");
    let f = web_funnel(&b, "up", 2, Duration::from_secs(10));
    drop(f.admit(1, now_ms()).unwrap());
    redis.kill();
    redis.restart();

    let _first = f.admit(1, now_ms()); // on the dropped connection
    let second = f.admit(1, now_ms());
    assert!(
        second.is_ok(),
        "the next admission waited for a back-off: {:?}",
        second.err()
    );
}
