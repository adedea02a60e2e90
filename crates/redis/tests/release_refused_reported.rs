//! A release Redis refuses for good (an ACL that allows the scripts but not ZREM) is reported
//! once, as a refused command is: the slot stays held until its lease ends, so the
//! misconfiguration must not be silent. Before, nothing was logged. And the calls then follow
//! `on_backend_error`, as the report says: before, they went on being admitted on Redis until
//! the slots no release could free filled the funnel, which then refused every call as full.

use std::time::Duration;

use resilient_http::OnBackendError;

mod common;
use common::*;

#[test]
fn a_release_refused_by_an_acl_is_reported_once() {
    collect_reports();
    let redis = RedisServer::start();
    let url = redis.url_of_a_user_without_zrem("norel");
    let b = backend(&url, OnBackendError::Closed, 1, "norel");
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    // Admitted, then released: the ZREM is refused, its reply read with the next admission's.
    drop(funnel.admit(1, now_ms()).expect("admitted"));
    // Refused as on_backend_error 'closed' says (Redis down), not as a full funnel.
    for _ in 0..3 {
        assert!(
            matches!(
                funnel.admit(1, now_ms()),
                Err(resilient_http::Refusal::BackendDown(_))
            ),
            "after a refused release, the calls follow on_backend_error"
        );
        // The message of a call refused so says why (the first, then in the back-off).
        let why = funnel.why_down().unwrap_or_default();
        assert!(
            why.starts_with("Redis: a slot given back was refused: answered NOPERM"),
            "{why}"
        );
        assert!(!why.contains("norel-pass"), "{why}");
    }
    let reports = reports();
    assert_eq!(reports.len(), 1, "{reports:?}");
    assert!(
        reports[0].starts_with("resilient: Redis answered NOPERM"),
        "{}",
        reports[0]
    );
    assert!(!reports[0].contains("127.0.0.1") && !reports[0].contains("norel-pass"));
}
