//! The Redis backend against a real `redis-server` started on a free loopback port by each
//! test (needs `redis-server` on PATH, as `make test` installs it).

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_core::{Admission, BreakerConfig, BudgetConfig, FunnelConfig};
use resilient_http::{Backend, Guard, OnBackendError, Refusal, UnavailableKind};
use resilient_redis::{Server, Target};

mod common;
use common::*;

#[test]
fn two_hosts_share_one_funnel_and_never_exceed_it() {
    let redis = RedisServer::start();
    let url = redis.url("t1:");
    let config = FunnelConfig::new(4, 1, Duration::from_secs(10)).unwrap();
    // Two "hosts": their own connection and their own shared memory each.
    let hosts: Vec<Arc<dyn Guard>> = (0..2)
        .map(|h| {
            backend(&url, OnBackendError::Closed, 1, &format!("f{h}"))
                .funnel("sap", config, false)
                .unwrap()
        })
        .collect();
    let in_flight = Arc::new(AtomicU32::new(0));
    let most = Arc::new(AtomicU32::new(0));
    let admitted = Arc::new(AtomicU32::new(0));
    std::thread::scope(|s| {
        for t in 0..8 {
            let guard = hosts[t % 2].clone();
            let (in_flight, most, admitted) = (in_flight.clone(), most.clone(), admitted.clone());
            s.spawn(move || {
                for _ in 0..200 {
                    if let Ok(permit) = guard.admit(1, now_ms()) {
                        let n = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(n, Ordering::SeqCst);
                        admitted.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        in_flight.fetch_sub(1, Ordering::SeqCst);
                        drop(permit);
                    } else {
                        std::thread::sleep(Duration::from_millis(3));
                    }
                }
            });
        }
    });
    assert!(most.load(Ordering::SeqCst) <= 4, "most at once: {most:?}");
    assert!(admitted.load(Ordering::SeqCst) > 100, "{admitted:?}");
    assert_eq!(
        redis.cli(&["ZCARD", "t1:{sap}:funnel"]),
        "0",
        "every slot given back"
    );
}

#[test]
fn background_callers_leave_the_reserve_and_a_lease_ends_on_the_server_clock() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("t2:"), OnBackendError::Closed, 1, "r");
    let config = FunnelConfig::new(2, 1, Duration::from_millis(80)).unwrap();
    let bg = b.funnel("sap", config, true).unwrap();
    let web = b.funnel("sap", config, false).unwrap();
    let held = bg.admit(1, now_ms()).unwrap();
    assert_eq!(
        bg.admit(1, now_ms() + 100).err(),
        Some(Refusal::Full),
        "cap 1 in the background"
    );
    let web_held = web.admit(1, now_ms()).unwrap();
    assert_eq!(
        web.admit(1, now_ms() + 100).err(),
        Some(Refusal::Full),
        "limit 2"
    );
    // Holders that never give back (a killed process): the leases end after 80 ms.
    std::mem::forget(held);
    std::mem::forget(web_held);
    std::thread::sleep(Duration::from_millis(120));
    let again = web.admit(1, now_ms() + 1000).expect("the leases ended");
    drop(again);
    assert_eq!(redis.cli(&["ZCARD", "t2:{sap}:funnel"]), "0");
}

#[test]
fn a_release_removes_only_its_own_lease_and_scripts_are_loaded_again() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("t3:"), OnBackendError::Closed, 1, "s");
    let config = FunnelConfig::new(3, 0, Duration::from_secs(10)).unwrap();
    let f = b.funnel("sap", config, false).unwrap();
    let a = f.admit(1, now_ms()).unwrap();
    let _b = f.admit(1, now_ms()).unwrap();
    assert_eq!(redis.cli(&["ZCARD", "t3:{sap}:funnel"]), "2");
    drop(a);
    assert_eq!(redis.cli(&["ZCARD", "t3:{sap}:funnel"]), "1");
    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
    let _c = f
        .admit(1, now_ms())
        .expect("NOSCRIPT: loaded and sent again");
    assert_eq!(redis.cli(&["ZCARD", "t3:{sap}:funnel"]), "2");
    let ttl: i64 = redis.cli(&["PTTL", "t3:{sap}:funnel"]).parse().unwrap();
    assert!(
        ttl > 9000,
        "the key lives as long as its longest lease: {ttl}"
    );
}

#[test]
fn one_budget_obeys_floor_plus_ratio_across_hosts() {
    let redis = RedisServer::start();
    let url = redis.url("t4:");
    let config = BudgetConfig::new(0.1, 5, Duration::from_secs(60)).unwrap();
    let a = backend(&url, OnBackendError::Closed, 1, "b0")
        .budget("sap", config)
        .unwrap();
    let b = backend(&url, OnBackendError::Closed, 1, "b1")
        .budget("sap", config)
        .unwrap();
    for i in 0..100 {
        if i % 2 == 0 {
            a.record_original(0)
        } else {
            b.record_original(0)
        }
    }
    let mut allowed = 0;
    for i in 0..40 {
        let host = if i % 2 == 0 { &a } else { &b };
        allowed += u32::from(host.try_consume(0));
    }
    assert_eq!(allowed, 15, "5 + 0.1 × 100");
    // A refusal's message gives the rule Redis applied.
    assert!(!a.try_consume(0));
    assert_eq!(
        a.refused_because(0).as_deref(),
        Some("the budget every host shares through Redis allows floor 5 + ratio 0.1 × originals per 60s")
    );
}

/// A retry refused without Redis says why, and what decided instead: 'closed' refuses every
/// one (the budget is not spent: Redis is down), 'local' the host's share of the budget.
#[test]
fn a_retry_refused_without_redis_says_why() {
    let mut redis = RedisServer::start();
    let url = redis.url("t4d:");
    let config = BudgetConfig::new(0.0, 2, Duration::from_secs(60)).unwrap();
    let closed = backend(&url, OnBackendError::Closed, 1, "bd0")
        .budget("sap", config)
        .unwrap();
    let local = backend(&url, OnBackendError::Local, 2, "bd1")
        .budget("sap", config)
        .unwrap();
    redis.kill();
    assert!(!closed.try_consume(now_ms()));
    let why = closed.refused_because(now_ms()).unwrap();
    assert!(
        why.starts_with("Redis: ")
            && why.ends_with("; on_backend_error 'closed' denies every retry meanwhile"),
        "{why}"
    );
    assert!(local.try_consume(now_ms()), "local: floor 2 / 2 hosts = 1");
    assert!(!local.try_consume(now_ms()));
    let why = local.refused_because(now_ms()).unwrap();
    assert!(
        why.starts_with("Redis: ")
            && why.ends_with("; this host's share of the budget decides meanwhile: a retry would make 2 in the last 60s, over the 1 allowed (floor 1 + ratio 0 × 0 originals), counted by every process of this host"),
        "{why}"
    );
}

#[test]
fn originals_recorded_without_waiting_are_counted_and_a_script_flush_loses_few() {
    let redis = RedisServer::start();
    let budget = backend(&redis.url("t4w:"), OnBackendError::Closed, 1, "b4w")
        .budget(
            "sap",
            BudgetConfig::new(1.0, 0, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    // Many more records than are ever left unread on the connection: every one counted.
    for _ in 0..100 {
        budget.record_original(0);
    }
    let allowed = (0..150).filter(|_| budget.try_consume(0)).count();
    assert_eq!(allowed, 100, "0 + 1.0 × 100 originals");

    // The scripts flushed under a live connection: the records sent before a reply says
    // NOSCRIPT are lost (the budget stricter, not looser); the next ones load it again.
    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
    for _ in 0..5 {
        budget.record_original(0);
    }
    assert!(
        !budget.try_consume(0),
        "the 5 records after the flush were not run"
    );
    for _ in 0..3 {
        budget.record_original(0);
    }
    let allowed = (0..10).filter(|_| budget.try_consume(0)).count();
    assert_eq!(allowed, 3, "counted again once the script was loaded");
}

#[test]
fn one_probe_across_hosts_when_the_breaker_half_opens() {
    let redis = RedisServer::start();
    let url = redis.url("t5:");
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 4, ms(10_000), ms(100), ms(1000)).unwrap();
    let a = backend(&url, OnBackendError::Closed, 1, "c0")
        .breaker("sap", config)
        .unwrap();
    let b = backend(&url, OnBackendError::Closed, 1, "c1")
        .breaker("sap", config)
        .unwrap();
    assert_eq!(a.admit(now_ms()), Admission::Closed);
    let mut opened = false;
    for i in 0..4 {
        let host = if i % 2 == 0 { &a } else { &b };
        opened |= host.record(true, 0, 0, 0).is_some();
    }
    assert!(opened, "4 calls, 4 failures");
    assert!(
        matches!(b.admit(now_ms()), Admission::Refused { .. }),
        "open everywhere"
    );
    std::thread::sleep(ms(150));
    let Admission::Probe { ticket, took_over } = a.admit(now_ms()) else {
        panic!("a probes")
    };
    assert!(!took_over);
    assert!(
        matches!(b.admit(now_ms()), Admission::Refused { .. }),
        "one probe for both hosts"
    );
    assert!(a.resolve(ticket, true, 0, 0).is_some());
    assert_eq!(
        a.admit(now_ms()),
        Admission::Closed,
        "its own transition is seen at once"
    );
    std::thread::sleep(ms(6));
    assert_eq!(
        b.admit(now_ms()),
        Admission::Closed,
        "another host's within 5 ms"
    );
}

#[test]
fn redis_down_uses_the_configured_behaviour_at_once_and_recovers() {
    let mut redis = RedisServer::start();
    let url = redis.url("t6:");
    let config = FunnelConfig::new(4, 0, Duration::from_secs(10)).unwrap();
    let closed = backend(&url, OnBackendError::Closed, 1, "d0")
        .funnel("sap", config, false)
        .unwrap();
    let open = backend(&url, OnBackendError::Open, 1, "d1")
        .funnel("sap", config, false)
        .unwrap();
    let local = backend(&url, OnBackendError::Local, 2, "d2")
        .funnel("sap", config, false)
        .unwrap();
    drop(closed.admit(1, now_ms()).unwrap());
    redis.kill();
    let started = Instant::now();
    assert_eq!(
        closed.admit(1, now_ms()).err(),
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull)),
        "closed: refused as the funnel refuses, saying why"
    );
    let _o: Vec<_> = (0..10)
        .map(|_| open.admit(1, now_ms()).expect("open: allowed"))
        .collect();
    let l: Vec<_> = (0..3).map(|_| local.admit(1, now_ms())).collect();
    assert_eq!(
        l.iter().filter(|p| p.is_ok()).count(),
        2,
        "local: 4 / 2 hosts"
    );
    assert!(
        started.elapsed() < Duration::from_millis(500),
        "{:?}",
        started.elapsed()
    );
    drop(l);
    redis.restart();
    let until = Instant::now() + Duration::from_secs(3);
    loop {
        if let Ok(p) = closed.admit(1, now_ms()) {
            drop(p);
            break;
        }
        assert!(Instant::now() < until, "not back after Redis returned");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(redis.cli(&["ZCARD", "t6:{sap}:funnel"]), "0");
}

/// Not a test: prints µs per operation (`cargo test --release -p resilient-redis -- --ignored
/// --nocapture timing`).
#[test]
#[ignore]
fn timing() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("tt:"), OnBackendError::Closed, 1, "tt");
    let f = web_funnel(&b, "sap", 10, Duration::from_secs(5));
    let budget = b
        .budget(
            "sap",
            BudgetConfig::new(0.1, 5, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    let n = 20_000;
    for _ in 0..1000 {
        drop(f.admit(1, 0).unwrap());
    }
    let t = Instant::now();
    for _ in 0..n {
        drop(f.admit(1, 0).unwrap());
    }
    eprintln!(
        "funnel admit+release: {:.1} µs",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let t = Instant::now();
    for _ in 0..n {
        budget.try_consume(0);
    }
    eprintln!(
        "budget decision: {:.1} µs",
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let server = Server::new(Target::parse(&redis.url("tt:")).unwrap()).unwrap();
    let t = Instant::now();
    for _ in 0..n {
        server
            .run(|c| redis::cmd("PING").query::<String>(c))
            .unwrap();
    }
    eprintln!("PING: {:.1} µs", t.elapsed().as_secs_f64() * 1e6 / n as f64);
}

/// One caller of a hung upstream: its failures come a timeout apart, so a run of
/// `consecutive_failures` outlasts the window. Each follows the one before within the window:
/// the run goes on and opens the breaker, as in shared memory.
#[test]
fn a_run_of_failures_longer_than_the_window_opens_the_breaker() {
    let redis = RedisServer::start();
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 20, ms(1_000), ms(60_000), ms(1000))
        .unwrap()
        .with_consecutive_failures(4)
        .unwrap();
    let a = backend(&redis.url("t9:"), OnBackendError::Closed, 1, "s9")
        .breaker("sap", config)
        .unwrap();
    for i in 0..3 {
        assert_eq!(a.record(true, 0, 0, 0), None, "failure {i}");
        std::thread::sleep(ms(400));
    }
    assert_eq!(
        a.record(true, 0, 0, 0),
        Some(resilient_core::Transition::Opened),
        "the fourth in a row, 1.2 s after the first"
    );
}

#[test]
fn a_streak_of_failures_across_hosts_opens_the_breaker_though_the_window_is_healthy() {
    let redis = RedisServer::start();
    let url = redis.url("t8:");
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 20, ms(10_000), ms(60_000), ms(1000))
        .unwrap()
        .with_consecutive_failures(5)
        .unwrap();
    let a = backend(&url, OnBackendError::Closed, 1, "s0")
        .breaker("sap", config)
        .unwrap();
    let b = backend(&url, OnBackendError::Closed, 1, "s1")
        .breaker("sap", config)
        .unwrap();
    for _ in 0..100 {
        assert_eq!(a.record(false, 0, 0, 0), None);
    }
    for i in 0..4 {
        let host = if i % 2 == 0 { &a } else { &b };
        assert_eq!(
            host.record(true, 0, 0, 0),
            None,
            "failure {i}: 4 in a row, a healthy window"
        );
    }
    assert_eq!(b.record(false, 0, 0, 0), None, "a success ends the streak");
    for i in 0..4 {
        assert_eq!(a.record(true, 0, 0, 0), None, "failure {i} of a new streak");
    }
    assert_eq!(
        b.record(true, 0, 0, 0),
        Some(resilient_core::Transition::Opened),
        "5 in a row, across hosts"
    );
    assert!(matches!(a.admit(now_ms()), Admission::Refused { .. }));
}

#[test]
fn with_share_web_and_background_each_keep_their_part_under_contention() {
    let redis = RedisServer::start();
    let b = backend(&redis.url("t9:"), OnBackendError::Closed, 1, "sh");
    let config = FunnelConfig::new(4, 2, Duration::from_secs(10))
        .unwrap()
        .with_share(true)
        .unwrap();
    // A guard remembers "full" for a few ms; each step asks with a later clock.
    let mut now = now_ms();
    let mut tick = || {
        now += 1000;
        now
    };
    let web = b.funnel("sap", config, false).unwrap();
    let bg = b.funnel("sap", config, true).unwrap();
    // Asked on an open connection, not by starting redis-cli: the demand lives 100 ms, and the
    // web refusal below needs it still there.
    let mut conn = redis::Client::open(format!("redis://127.0.0.1:{}/0", redis.port()))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut web_held: Vec<_> = (0..4).map(|_| web.admit(1, tick()).unwrap()).collect();
    assert_eq!(bg.admit(1, tick()).err(), Some(Refusal::Full), "all 4 held");
    let wanted: i64 = redis::cmd("EXISTS")
        .arg("t9:{sap}:funnel:background-wanted")
        .query(&mut conn)
        .unwrap();
    assert_eq!(wanted, 1, "the background's demand is recorded");
    web_held.truncate(2);
    assert_eq!(
        web.admit(1, tick()).err(),
        Some(Refusal::Full),
        "web keeps to its part (2) while the background wants slots"
    );
    let bg_held: Vec<_> = (0..2).map(|_| bg.admit(1, tick()).unwrap()).collect();
    assert_eq!(redis.cli(&["ZCARD", "t9:{sap}:funnel:background"]), "2");
    assert_eq!(redis.cli(&["ZCARD", "t9:{sap}:funnel"]), "4");
    drop(bg_held);
    assert_eq!(
        redis.cli(&["ZCARD", "t9:{sap}:funnel:background"]),
        "0",
        "a background release leaves both sets"
    );
    assert_eq!(redis.cli(&["ZCARD", "t9:{sap}:funnel"]), "2");
    let bg_held: Vec<_> = (0..2).map(|_| bg.admit(1, tick()).unwrap()).collect();
    assert_eq!(
        bg.admit(1, tick()).err(),
        Some(Refusal::Full),
        "the background never holds more than limit - reserve"
    );
    // The demand lives 100 ms on the server's clock; then web may use what is free again.
    drop(bg_held);
    std::thread::sleep(Duration::from_millis(150));
    let more: Vec<_> = (0..2).map(|_| web.admit(1, tick()).unwrap()).collect();
    assert_eq!(redis.cli(&["ZCARD", "t9:{sap}:funnel"]), "4");
    drop((more, web_held));
    assert_eq!(redis.cli(&["ZCARD", "t9:{sap}:funnel"]), "0");
}

#[test]
fn background_callers_without_share_count_as_background_for_a_funnel_shared_with_share() {
    // One name, two configurations (a queue middleware without `share`, a client with it): the
    // plain one's background holders must count as background, or the shared funnel takes
    // them for web holders and keeps the web out of its own reserve.
    let redis = RedisServer::start();
    let b = backend(&redis.url("t10:"), OnBackendError::Closed, 1, "mix");
    let plain = FunnelConfig::new(4, 2, Duration::from_secs(10)).unwrap();
    let shared = plain.with_share(true).unwrap();
    let mut now = now_ms();
    let mut tick = || {
        now += 1000;
        now
    };
    let plain_bg = b.funnel("sap", plain, true).unwrap();
    let web = b.funnel("sap", shared, false).unwrap();
    let bg = b.funnel("sap", shared, true).unwrap();
    let plain_held: Vec<_> = (0..2).map(|_| plain_bg.admit(1, tick()).unwrap()).collect();
    assert_eq!(
        plain_bg.admit(1, tick()).err(),
        Some(Refusal::Full),
        "limit - reserve"
    );
    assert_eq!(redis.cli(&["ZCARD", "t10:{sap}:funnel:background"]), "2");
    let web_held: Vec<_> = (0..2).map(|_| web.admit(1, tick()).unwrap()).collect();
    assert_eq!(
        bg.admit(1, tick()).err(),
        Some(Refusal::Full),
        "marks demand"
    );
    drop(web_held);
    assert_eq!(
        bg.admit(1, tick()).err(),
        Some(Refusal::Full),
        "the background's part is held by the plain background callers"
    );
    let w = web.admit(1, tick()).expect("the web keeps its reserve");
    drop((w, plain_held));
    assert_eq!(redis.cli(&["ZCARD", "t10:{sap}:funnel"]), "0");
    assert_eq!(redis.cli(&["ZCARD", "t10:{sap}:funnel:background"]), "0");
}

/// The breaker of "up" on `redis` (keys under `prefix`), opened by four failures: `config`
/// must open on them (`min_calls` 4 at a ratio of 0.5).
fn opened_breaker(
    redis: &RedisServer,
    prefix: &str,
    seg: &str,
    config: BreakerConfig,
) -> Arc<dyn resilient_http::BreakerStore> {
    let b = backend(&redis.url(prefix), OnBackendError::Closed, 1, seg)
        .breaker("up", config)
        .unwrap();
    for _ in 0..4 {
        b.record(true, 0, 0, 0);
    }
    b
}

/// One name, two windows (a web client's 10 s, a queue job's 60 s): two breakers, each with
/// its own key, as budgets of two windows are. In one key each counted in epochs of its own
/// width and took the other's buckets and streak for old ones (in shared memory, 720 failures
/// in an hour, a web and a queue call taking turns, never opened it).
#[test]
fn two_windows_of_one_name_are_two_breakers_on_redis() {
    let redis = RedisServer::start();
    let s = Duration::from_secs;
    let b = backend(&redis.url("t30:"), OnBackendError::Closed, 1, "windows");
    let web = b
        .breaker("up", BreakerConfig::new(0.5, 4, s(10), s(5), s(1)).unwrap())
        .unwrap();
    let queue = b
        .breaker("up", BreakerConfig::new(0.5, 4, s(60), s(5), s(1)).unwrap())
        .unwrap();
    for _ in 0..4 {
        assert_eq!(web.admit(now_ms()), Admission::Closed);
        web.record(true, 0, 0, 0);
    }
    assert!(matches!(web.admit(now_ms()), Admission::Refused { .. }));
    assert_eq!(
        queue.admit(now_ms()),
        Admission::Closed,
        "the queue's own breaker"
    );
    queue.record(false, 0, 0, 0);
    let mut keys = redis
        .cli(&["KEYS", "t30:*"])
        .lines()
        .map(str::to_owned)
        .collect::<Vec<_>>();
    keys.sort();
    assert_eq!(keys, ["t30:{up}:breaker:3000ms", "t30:{up}:breaker:500ms"]);
}

/// The breaker's key lives for a window past its state's moment, set by every write: an open
/// breaker whose probes keep failing, or one whose probe is still out, never expires into
/// "closed" (the key's absence) while the window is short.
#[test]
fn an_open_or_half_open_breaker_outlives_a_short_window_on_redis() {
    let redis = RedisServer::start();
    let ms = Duration::from_millis;
    // Window 1 s, open 100 ms, probe bound 5 s.
    let config = BreakerConfig::new(0.5, 4, ms(1_000), ms(100), ms(5_000)).unwrap();
    let b = opened_breaker(&redis, "t12:", "ttl", config);
    let pttl = || {
        redis
            .cli(&["PTTL", "t12:{up}:breaker:50ms"])
            .parse::<i64>()
            .unwrap()
    };
    std::thread::sleep(ms(150));
    let Admission::Probe { ticket, .. } = b.admit(now_ms()) else {
        panic!("a probe after open_for")
    };
    assert!(pttl() > 5_000, "kept past the probe's bound: {} ms", pttl());
    assert_eq!(
        b.resolve(ticket, false, now_ms(), 0),
        Some(resilient_core::Transition::Reopened)
    );
    assert!(pttl() > 1_000, "kept past the open period: {} ms", pttl());
}

/// An open breaker nobody calls past its open period and a whole window is still open on
/// Redis, as in shared memory: the next admission is the one probe, the others refused. Before,
/// its key expired a window after the open period, read as closed, and every host sent until
/// `consecutive_failures` new failures opened it again.
#[test]
fn an_open_breaker_left_idle_is_still_open_on_redis() {
    let redis = RedisServer::start();
    let ms = Duration::from_millis;
    // Window 100 ms, open 100 ms: the key lived 205 ms past the opening.
    let config = BreakerConfig::new(0.5, 4, ms(100), ms(100), ms(1_000)).unwrap();
    let b = opened_breaker(&redis, "t16:", "idle", config);
    assert!(
        matches!(b.admit(now_ms()), Admission::Refused { .. }),
        "open"
    );
    std::thread::sleep(ms(400));
    assert!(
        matches!(b.admit(now_ms()), Admission::Probe { .. }),
        "one probe after an idle spell"
    );
    assert!(
        matches!(b.admit(now_ms()), Admission::Refused { .. }),
        "the others refused while it is out"
    );
}

/// A Redis server whose clock stepped back (an hour here, as a VM restored from a snapshot)
/// leaves the breaker's moment ahead of now. Closed, its failures still count (before, every
/// attempt passed for one sent before the close, for that hour); open, a moment further ahead
/// than the open period that set it is over (before, every host was refused for that hour).
/// A moment set by a process with a longer period than this one's is no step.
#[test]
fn a_server_clock_stepped_back_neither_blinds_nor_holds_the_breaker() {
    let redis = RedisServer::start();
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 4, ms(10_000), ms(100), ms(1_000)).unwrap();
    let b = backend(&redis.url("t17:"), OnBackendError::Closed, 1, "clock")
        .breaker("up", config)
        .unwrap();
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let ahead = |ms: u64| (wall + ms).to_string();
    let key = "t17:{up}:breaker:500ms";
    // Closed since an hour from now: attempts of 5 ms fail. The first, in flight when the step
    // is seen, may have been sent before the close: not counted; those sent after it count.
    redis.cli(&[
        "HSET",
        key,
        "p",
        "0",
        "g",
        "1",
        "at",
        &ahead(3_600_000),
        "l",
        "0",
    ]);
    let failed = || {
        let now = now_ms();
        b.record(true, now - 5, now, 0)
    };
    assert_eq!(failed(), None);
    std::thread::sleep(ms(10));
    let opened = (0..4).filter_map(|_| failed()).collect::<Vec<_>>();
    assert_eq!(opened, [resilient_core::Transition::Opened]);
    // Open until an hour from now, set with an open period of 100 ms: over.
    redis.cli(&[
        "HSET",
        key,
        "p",
        "1",
        "g",
        "2",
        "at",
        &ahead(3_600_000),
        "l",
        "100",
    ]);
    std::thread::sleep(ms(10)); // past the 5 ms an admission answer is kept
    assert!(
        matches!(b.admit(now_ms()), Admission::Probe { .. }),
        "over: one probe"
    );
    // Open for a minute by a process whose open period is a minute: still open here.
    redis.cli(&[
        "HSET",
        key,
        "p",
        "1",
        "g",
        "4",
        "at",
        &ahead(60_000),
        "l",
        "60000",
    ]);
    std::thread::sleep(ms(10));
    assert!(matches!(b.admit(now_ms()), Admission::Refused { .. }));
}

/// As in shared memory: a close empties the bucket it falls in (the failures that opened the
/// breaker), and an attempt sent before the close does not count after it.
#[test]
fn a_close_on_redis_starts_the_window_afresh() {
    let redis = RedisServer::start();
    let ms = Duration::from_millis;
    // Buckets of 3 min: the failures, the probe and the close fall in one bucket.
    let config = BreakerConfig::new(0.5, 4, ms(3_600_000), ms(100), ms(1_000)).unwrap();
    let b = opened_breaker(&redis, "t13:", "fresh", config);
    std::thread::sleep(ms(150));
    let Admission::Probe { ticket, .. } = b.admit(now_ms()) else {
        panic!("a probe after open_for")
    };
    assert_eq!(
        b.resolve(ticket, true, now_ms(), 0),
        Some(resilient_core::Transition::Closed)
    );
    // Three attempts sent 10 s ago (before the close) time out now: not counted.
    let now = now_ms();
    for _ in 0..3 {
        assert_eq!(b.record(true, now - 10_000, now, 0), None);
    }
    // One new failure: 1 call since the close, under min_calls (with the old failures it
    // would be 5 of 5).
    assert_eq!(b.record(true, now, now, 0), None);
    std::thread::sleep(ms(10)); // past the 5 ms an admission answer is kept
    assert_eq!(b.admit(now_ms()), Admission::Closed);
}

/// A slot on Redis lapses at its lease's end, when another host may take it: the permit says
/// so, and the attempt loop cuts the attempt's timeout to it.
#[test]
fn a_redis_slot_lasts_its_lease() {
    let redis = RedisServer::start();
    let config = FunnelConfig::new(2, 0, Duration::from_millis(1_500)).unwrap();
    let f = backend(&redis.url("t14:"), OnBackendError::Closed, 1, "lasts")
        .funnel("up", config, false)
        .unwrap();
    let asked = std::time::Instant::now();
    let permit = f.admit(1, now_ms()).unwrap();
    // The lease less the admission's round trip (see slow_replies.rs).
    let lasts = permit.lasts().expect("bounded");
    assert!(
        lasts <= Duration::from_millis(1_500)
            && lasts >= Duration::from_millis(1_500).saturating_sub(asked.elapsed()),
        "{lasts:?}"
    );
}

/// A ticket given back on Redis and one granted by the local fallback (Redis gone in between)
/// are never the same half-open period, whatever their generations read as.
#[test]
fn a_redis_ticket_and_a_local_one_are_never_a_retake() {
    let redis = RedisServer::start();
    let config = BreakerConfig::new(
        0.5,
        4,
        Duration::from_secs(10),
        Duration::from_secs(5),
        Duration::from_secs(1),
    )
    .unwrap();
    let b = backend(&redis.url("t15:"), OnBackendError::Local, 1, "retake")
        .breaker("up", config)
        .unwrap();
    let redis_ticket = resilient_core::Ticket::from_word(3 << 62);
    // A shared-memory ticket: half-open (phase 2), generation 2.
    let local_ticket = resilient_core::Ticket::from_word(2 << 62 | 2 << 40 | 1_000);
    assert!(!b.retakes(redis_ticket, local_ticket));
    assert!(!b.retakes(local_ticket, resilient_core::Ticket::from_word(3 << 62 | 4)));
    assert!(b.retakes(redis_ticket, resilient_core::Ticket::from_word(3 << 62 | 2)));
}

/// A breaker's record that Redis did not answer is decided by the `local` fallback, and that
/// decision is counted as a fallback like an admission's (it was not).
#[test]
fn a_breaker_record_without_redis_is_counted_as_a_fallback() {
    let mut redis = RedisServer::start();
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 4, ms(10_000), ms(100), ms(1000)).unwrap();
    let events = Arc::new(Fallbacks::default());
    let breaker = backend(&redis.url("t9:"), OnBackendError::Local, 1, "c9")
        .with_events(events.clone())
        .breaker("sap", config)
        .unwrap();
    assert_eq!(breaker.admit(now_ms()), Admission::Closed);
    redis.kill();
    breaker.record(true, 0, 0, 0);
    assert_eq!(events.count(), 1);
}

/// A retry counted and never sent (a guard refused it after its backoff) is given back on
/// Redis too: the floor's retry is there again.
#[test]
fn a_retry_never_sent_is_given_back() {
    let redis = RedisServer::start();
    let budget = backend(&redis.url("gb:"), OnBackendError::Closed, 1, "gb")
        .budget(
            "sap",
            BudgetConfig::new(0.0, 1, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    assert!(budget.try_consume(0), "the floor's one retry");
    assert!(!budget.try_consume(0), "spent");
    budget.give_back(0, 0);
    assert!(budget.try_consume(0), "given back");
    assert!(!budget.try_consume(0), "spent again");
    assert_eq!(
        redis.cli(&["HGET", "gb:{sap}:budget:60000ms:sums", "r"]),
        "1"
    );
}

/// A retry granted without Redis (the `local` behaviour, Redis down) is given back to the
/// local budget that counted it, not to Redis.
#[test]
fn a_retry_granted_without_redis_is_given_back_there() {
    let mut redis = RedisServer::start();
    let seg = segment("give-back-local");
    let b = resilient_redis::Redis::new(
        Arc::new(Server::new(Target::parse(&redis.url("gl:")).unwrap()).unwrap()),
        OnBackendError::Local,
        1,
        Some(Arc::new(resilient_http::SharedMemory::new(seg.clone()))),
    );
    let config = BudgetConfig::new(0.0, 2, Duration::from_secs(60)).unwrap();
    let budget = b.budget("sap", config).unwrap();
    assert!(budget.try_consume(1), "on Redis");
    redis.kill();
    assert!(budget.try_consume(2), "Redis down: the local budget's");
    let local = resilient_core::RetryBudget::new(seg, "sap", config).unwrap();
    assert_eq!(local.stats(3).retries, 1);
    budget.give_back(2, 3);
    assert_eq!(local.stats(3).retries, 0, "given back where it was counted");
    budget.give_back(1, 3);
    assert_eq!(local.stats(3).retries, 0, "Redis's stays Redis's");
}
