//! A report quotes Redis's answer, never what was sent: Redis quotes the arguments of a
//! command it does not know, which in the handshake are the password. (A test binary of its
//! own: reports are per process.)

use std::time::Duration;

use resilient_http::{OnBackendError, Refusal, UnavailableKind};

mod common;
use common::*;

/// Redis quotes the arguments of a command it does not know: a server without HELLO (Redis 5,
/// or HELLO renamed away) answered the RESP3 handshake `HELLO 3 AUTH default <password>` with
/// them, and the report put the password in PHP's error log.
#[test]
fn an_unknown_handshake_command_is_reported_without_its_arguments() {
    collect_reports();
    let redis =
        RedisServer::start_with(&["--requirepass", "Xsecret1", "--rename-command", "HELLO", ""]);
    let url = format!(
        "redis://:Xsecret1@127.0.0.1:{}/0?prefix=hello:&protocol=resp3",
        redis.port()
    );
    let b = backend(&url, OnBackendError::Closed, 1, "hello");
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    assert_eq!(
        funnel.admit(1, now_ms()).err(),
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull))
    );
    let reports = reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(reports[0].contains("unknown command"), "{}", reports[0]);
    assert!(!reports[0].contains("Xsecret1"), "{}", reports[0]);
}
