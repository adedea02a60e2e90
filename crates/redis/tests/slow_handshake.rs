//! A connect ends within its wait however the server answers it. The redis crate gives every
//! read of the handshake (TLS's, AUTH's, SELECT's) the whole wait again, so a server whose
//! answer comes in pieces, each in time (a TLS certificate chain of several segments on a lossy
//! link), could hold a connect for a multiple of its wait, and one that trickles forever for
//! ever. Here a server trickles a byte every 40 ms, never completing an answer, for 3 s; each
//! connect has a wait of 100 ms.

mod common;
use common::*;

use std::io::Write;
use std::net::TcpListener;
use std::time::{Duration, Instant};

use resilient_http::{OnBackendError, Refusal, UnavailableKind};

/// Accepts connections on a port of its own and, on each, writes `first` and then one byte every
/// 40 ms for 3 s.
fn trickling_server(first: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let until = Instant::now() + Duration::from_secs(3);
                let _ = stream.write_all(first);
                while Instant::now() < until && stream.write_all(b"O").is_ok() {
                    std::thread::sleep(Duration::from_millis(40));
                }
            });
        }
    });
    port
}

/// One admission on `url` ('closed'): refused as FunnelFull, and how long it took.
fn admit_on(url: &str, tag: &str) -> (Option<Refusal>, Duration) {
    let b = backend(url, OnBackendError::Closed, 1, tag);
    let f = web_funnel(&b, "up", 4, Duration::from_secs(5));
    let started = Instant::now();
    let refused = f.admit(1, now_ms()).err();
    (refused, started.elapsed())
}

fn assert_ends_within_its_wait(what: &str, (refused, took): (Option<Refusal>, Duration)) {
    assert_eq!(
        refused,
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull)),
        "{what}: no connection, 'closed'"
    );
    assert!(
        took < Duration::from_millis(1000),
        "{what}: the connect ends within its 100 ms wait (and slack), took {took:?}"
    );
}

/// `rediss://`: the server's TLS record header announces 16 KB, which never all come.
#[test]
fn a_tls_handshake_answered_byte_by_byte_ends_within_the_wait() {
    let port = trickling_server(&[0x16, 0x03, 0x03, 0x40, 0x00]);
    assert_ends_within_its_wait(
        "TLS",
        admit_on(&format!("rediss://127.0.0.1:{port}/0?timeout=0.1"), "h1"),
    );
}

/// A password: the reply to AUTH is a line that never ends.
#[test]
fn an_auth_answered_byte_by_byte_ends_within_the_wait() {
    let port = trickling_server(b"+");
    assert_ends_within_its_wait(
        "AUTH",
        admit_on(
            &format!("redis://:s3cret@127.0.0.1:{port}/0?timeout=0.1"),
            "h2",
        ),
    );
}

/// A database other than 0: the reply to SELECT is a line that never ends.
#[test]
fn a_select_answered_byte_by_byte_ends_within_the_wait() {
    let port = trickling_server(b"+");
    assert_ends_within_its_wait(
        "SELECT",
        admit_on(&format!("redis://127.0.0.1:{port}/3?timeout=0.1"), "h3"),
    );
}
