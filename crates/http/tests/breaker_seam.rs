//! The circuit breaker through the guard seam, on virtual time: a scripted upstream failing,
//! the shared-memory breaker of `resilient_core` behind `BreakerGuard`, and what was sent.

mod support;

use std::sync::Arc;
use std::time::Duration;

use resilient_core::{BreakerConfig, CircuitBreaker, Segment};
use resilient_http::{BreakerGuard, HttpClient, RequestOptions, Response, Unavailable};
use serde_json::json;
use support::*;

async fn get(rig: &Rig, c: &HttpClient) -> Result<Response, Unavailable> {
    let req = c.prepare("GET", "/", RequestOptions::new()).unwrap();
    c.call(rig.env.clone(), req, None).await
}

#[tokio::test(start_paused = true)]
async fn opens_refuses_without_sending_probes_once_and_closes() {
    let path =
        std::env::temp_dir().join(format!("resilient-breaker-seam-{}.shm", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let seg = Arc::new(Segment::open(&path, 4).unwrap());
    let s = Duration::from_secs;
    // 2 calls, half failing, open 5 s (± 20 %), probe bound 1 s.
    let breaker = CircuitBreaker::new(
        seg,
        "up",
        BreakerConfig::new(0.5, 2, s(10), s(5), s(1)).unwrap(),
    )
    .unwrap();
    let mut rig = Rig::new(
        vec![status(503), status(404), status(503), status(503)],
        status(200),
    );
    rig.env = rig.env.clone().guard(Arc::new(BreakerGuard::new(
        Arc::new(breaker),
        &[503],
        Duration::from_secs(1),
    )));
    let c = rig.client(json!({"max_attempts": 1, "budget": false}));

    assert!(get(&rig, &c).await.unwrap_err().is_upstream_failed());
    assert_eq!(
        get(&rig, &c).await.unwrap().status(),
        404,
        "a 4xx is an answer"
    );
    let e = get(&rig, &c).await.unwrap_err(); // 2 of 3 failed: open
    assert!(e.is_upstream_failed());
    assert_eq!(rig.sends(), 3);
    for _ in 0..10 {
        let e = get(&rig, &c).await.unwrap_err();
        assert!(e.is_circuit_open() && e.is_refusal(), "{e}");
        assert_eq!(e.attempts(), 0);
    }
    assert_eq!(rig.sends(), 3, "nothing sent while open");

    tokio::time::advance(s(6)).await; // past open_for + 20 %
    assert!(
        get(&rig, &c).await.unwrap_err().is_upstream_failed(),
        "the probe: 503"
    );
    assert_eq!(rig.sends(), 4);
    assert!(
        get(&rig, &c).await.unwrap_err().is_circuit_open(),
        "reopened"
    );
    tokio::time::advance(s(6)).await;
    assert_eq!(
        get(&rig, &c).await.unwrap().status(),
        200,
        "the probe: 200 closes it"
    );
    assert_eq!(get(&rig, &c).await.unwrap().status(), 200);
    assert_eq!(rig.sends(), 6);
    std::fs::remove_file(path).unwrap();
}
