//! A server at the Redis URL that does not speak Redis's protocol (an HTTP server on that
//! port): the calls fall back as configured, and the report is one line that says so. Before,
//! it read "Redis answered parse error (Parse error at 1" and the parser's words over four lines.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use resilient_http::{OnBackendError, Refusal, UnavailableKind};

mod common;
use common::*;

#[test]
fn a_server_that_is_not_redis_is_reported_on_one_line() {
    collect_reports();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 1024];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\n\r\nnot redis\n",
            );
        }
    });
    let b = backend(
        &format!("redis://127.0.0.1:{port}/0?prefix=nr:"),
        OnBackendError::Closed,
        1,
        "nr",
    );
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    assert_eq!(
        funnel.admit(1, now_ms()).err(),
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull))
    );
    let why = funnel.why_down().unwrap_or_default();
    assert!(
        why.starts_with("Redis: the server does not answer as Redis does"),
        "{why}"
    );
    let reports = reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0]
            .starts_with("resilient: the server at the Redis URL does not answer as Redis does"),
        "{}",
        reports[0]
    );
    assert!(!reports[0].contains('\n'), "{}", reports[0]);
}
