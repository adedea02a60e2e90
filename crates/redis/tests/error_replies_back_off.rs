//! An error Redis answers (OOM, BUSY, READONLY) starts the same back-off as a failed
//! connection: for 50 ms, doubling, nothing is sent and the guards use their
//! `on_backend_error` behaviour. Without it every admission of every worker hit a struggling
//! Redis at once. WRONGTYPE under one of our keys backs off that key alone.

mod common;
use common::*;

use std::time::{Duration, Instant};

use resilient_http::OnBackendError;

#[test]
fn admissions_answered_with_errors_back_off() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("e1:"), OnBackendError::Closed, 1, "e1");
    let f = web_funnel(&b, "up", 4, Duration::from_secs(20));
    drop(f.admit(1, now_ms()).unwrap()); // connected, script loaded
    assert_eq!(
        redis.cli(&["SET", "e1:{up}:funnel", "not a sorted set"]),
        "OK"
    );
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let until = Instant::now() + Duration::from_millis(300);
    let mut asked = 0;
    while Instant::now() < until {
        assert!(f.admit(1, now_ms()).is_err(), "WRONGTYPE: refused (closed)");
        asked += 1;
    }
    let info = redis.cli(&["INFO", "commandstats"]);
    let sent: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap());
    // Back-offs of 50, 100, 200 ms in 300 ms: a handful, not one per admission.
    assert!(
        sent <= 6,
        "{sent} admissions reached Redis out of {asked} asked in 300 ms"
    );
    eprintln!("{sent} of {asked} admissions reached Redis in 300 ms");
    assert!(asked > 100);
}

/// WRONGTYPE is about one key (something else holds a key of ours): that key's admissions back
/// off, the server's other names stay on Redis. Before, the server's back-off held every name
/// back, so a name whose key was taken over kept all the others on `on_backend_error` (refused,
/// here) for as long as its own calls went on.
#[test]
fn a_wrong_type_under_one_name_leaves_the_other_names_on_redis() {
    let redis = RedisServer::start();
    // A wait far above a pause of the machine: the point is the key's back-off, not a timeout.
    let b = backend(
        &format!("{}&timeout=2", redis.url("e2:")),
        OnBackendError::Closed,
        1,
        "e2",
    );
    let taken = web_funnel(&b, "up", 4, Duration::from_secs(20));
    let other = web_funnel(&b, "other", 4, Duration::from_secs(20));
    drop(taken.admit(1, now_ms()).unwrap());
    drop(other.admit(1, now_ms()).unwrap());
    assert_eq!(
        redis.cli(&["SET", "e2:{up}:funnel", "not a sorted set"]),
        "OK"
    );
    redis.cli(&["CONFIG", "RESETSTAT"]);
    let until = Instant::now() + Duration::from_millis(300);
    let (mut asked, mut admitted) = (0, 0);
    while Instant::now() < until {
        assert!(
            taken.admit(1, now_ms()).is_err(),
            "WRONGTYPE: refused (closed)"
        );
        // The refused call's message: Redis's answer, then the key's back-off.
        let why = taken.why_down().unwrap_or_default();
        assert!(why.starts_with("Redis: answered WRONGTYPE"), "{why}");
        admitted += usize::from(other.admit(1, now_ms()).is_ok());
        asked += 1;
    }
    let info = redis.cli(&["INFO", "commandstats"]);
    let errors: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:"))
        .and_then(|rest| rest.split("failed_calls=").nth(1))
        .and_then(|rest| rest.split(',').next())
        .map_or(0, |n| n.parse().unwrap());
    assert_eq!(
        admitted, asked,
        "the other name is admitted on Redis every time"
    );
    assert!(
        (1..=6).contains(&errors),
        "{errors} admissions of the taken key reached Redis out of {asked} asked in 300 ms"
    );
    assert!(asked > 100);
}
