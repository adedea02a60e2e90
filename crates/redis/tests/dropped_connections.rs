//! A connection the server's end dropped while this process was not using it (Redis's idle
//! `timeout`, a restart, a proxy) is opened again, not taken for an unreachable Redis: no
//! fallback decision (when the drop is seen before a command is written), and no back-off.

mod common;
use common::*;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use resilient_http::{Backend, OnBackendError};

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

/// Dropped while in use (a restart between two commands): a funnel admission is sent again on
/// a new connection (the acquire is idempotent by token); any other command falls back (Redis
/// may have read it), and the next one connects again at once.
#[test]
fn a_connection_dropped_by_a_restart_costs_no_admission_and_no_back_off() {
    let mut redis = RedisServer::start();
    let b = backend(&redis.url("d2:"), OnBackendError::Closed, 1, "d2");
    let f = web_funnel(&b, "up", 2, Duration::from_secs(10));
    drop(f.admit(1, now_ms()).unwrap());
    redis.kill();
    redis.restart();

    let first = f.admit(1, now_ms()); // found the connection dropped
    assert!(first.is_ok(), "fell back: {:?}", first.err());

    let budget = b
        .budget(
            "up",
            resilient_core::BudgetConfig::new(0.1, 5, Duration::from_secs(10)).unwrap(),
        )
        .unwrap();
    redis.kill();
    redis.restart();
    // `closed`: a retry allowed is Redis's answer (the floor allows 5).
    assert!(!budget.try_consume(now_ms()), "not sent again: falls back");
    assert!(budget.try_consume(now_ms()), "no back-off: connected again");
}

/// Forwards one connection at a time to Redis; `lose_reply` set, the next reply from Redis is
/// not forwarded and both connections are closed (a proxy or a restart cutting in between).
fn lossy_proxy(redis_port: u16) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let lose_reply = Arc::new(AtomicBool::new(false));
    let lose = lose_reply.clone();
    std::thread::spawn(move || {
        for client in listener.incoming() {
            let client = client.unwrap();
            let server = TcpStream::connect(("127.0.0.1", redis_port)).unwrap();
            let (mut c_in, mut s_out) = (client.try_clone().unwrap(), server.try_clone().unwrap());
            std::thread::spawn(move || std::io::copy(&mut c_in, &mut s_out));
            let (mut s_in, mut c_out) = (server, client);
            let mut buf = [0u8; 4096];
            while let Ok(n @ 1..) = s_in.read(&mut buf) {
                if lose.swap(false, Ordering::SeqCst) {
                    break;
                }
                if c_out.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            let _ = c_out.shutdown(Shutdown::Both);
            let _ = s_in.shutdown(Shutdown::Both);
        }
    });
    (port, lose_reply)
}

/// An admission Redis ran whose reply was lost with the connection: sent again with the same
/// token, it finds its own slot and is granted, without a second slot (a funnel of 1).
#[test]
fn an_admission_sent_again_after_its_reply_was_lost_takes_one_slot() {
    let redis = RedisServer::start();
    let (port, lose_reply) = lossy_proxy(redis.port());
    let url = format!("redis://127.0.0.1:{port}/0?prefix=d3:");
    let b = backend(&url, OnBackendError::Closed, 1, "d3");
    let f = web_funnel(&b, "up", 1, Duration::from_secs(10));
    drop(f.admit(1, now_ms()).unwrap()); // connected, script loaded

    lose_reply.store(true, Ordering::SeqCst);
    let permit = f.admit(1, now_ms());
    assert!(!lose_reply.load(Ordering::SeqCst), "a reply was lost");
    assert!(permit.is_ok(), "not granted: {:?}", permit.err());
    assert_eq!(redis.cli(&["ZCARD", "d3:{up}:funnel"]), "1");
    drop(permit);
    drop(until_ok("the release was lost", || f.admit(1, now_ms())));
}
