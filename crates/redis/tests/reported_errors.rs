//! An error Redis answers (here NOAUTH: a server that wants a password the URL does not give)
//! is reported once per process and kind, without the URL; the guard falls back as configured.

use std::time::Duration;

use resilient_http::{OnBackendError, Refusal, UnavailableKind};

mod common;
use common::*;

#[test]
fn a_server_error_is_reported_once_per_kind() {
    collect_reports();
    let redis = RedisServer::start();
    redis.cli(&["CONFIG", "SET", "requirepass", "s3cret"]);
    let b = backend(&redis.url("rep:"), OnBackendError::Closed, 1, "rep");
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    for _ in 0..3 {
        assert_eq!(
            funnel.admit(1, now_ms()).err(),
            Some(Refusal::BackendDown(UnavailableKind::FunnelFull))
        );
        // What the refused call's message says.
        let why = funnel.why_down().unwrap_or_default();
        assert!(why.starts_with("Redis: answered NOAUTH"), "{why}");
        assert!(
            !why.contains("127.0.0.1") && !why.contains("s3cret"),
            "{why}"
        );
        // Past the back-off, so that each turn asks Redis again.
        std::thread::sleep(resilient_redis::MAX_BACKOFF + Duration::from_millis(50));
    }
    let reports = reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].starts_with("resilient: Redis answered NOAUTH"),
        "{}",
        reports[0]
    );
    assert!(!reports[0].contains("127.0.0.1") && !reports[0].contains("s3cret"));
}
