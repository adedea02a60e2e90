//! A Redis that answers reply by reply, slowly (a delaying proxy in front of a real
//! redis-server): an operation that reads several replies must still end near its wait, not
//! after one full socket timeout per reply.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use resilient_core::BreakerConfig;
use resilient_http::{Backend, BreakerGuard, Guard, OnBackendError, Refusal, UnavailableKind};

mod common;
use common::*;

/// A proxy to `port`: requests go through as they come, replies through `relay(from redis,
/// to client)`, one thread per direction and connection.
fn proxy(port: u16, relay: fn(TcpStream, TcpStream, Duration), delay: Duration) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let proxy = listener.local_addr().unwrap().port();
    thread::spawn(move || {
        for client in listener.incoming() {
            let Ok(client) = client else { break };
            let server = TcpStream::connect(("127.0.0.1", port)).unwrap();
            let (mut up_in, mut up_out) =
                (client.try_clone().unwrap(), server.try_clone().unwrap());
            thread::spawn(move || {
                let _ = std::io::copy(&mut up_in, &mut up_out);
            });
            thread::spawn(move || relay(server, client, delay));
        }
    });
    proxy
}

/// A proxy to `port` that holds each line Redis sends back (`…\r\n`) for `delay`.
fn line_by_line_proxy(port: u16, delay: Duration) -> u16 {
    proxy(
        port,
        |mut down_in, mut down_out, delay| {
            let mut buf = [0u8; 16 * 1024];
            let mut pending: Vec<u8> = Vec::new();
            loop {
                match down_in.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => pending.extend_from_slice(&buf[..n]),
                }
                while let Some(end) = pending.windows(2).position(|w| w == b"\r\n") {
                    let line: Vec<u8> = pending.drain(..end + 2).collect();
                    thread::sleep(delay);
                    if down_out.write_all(&line).is_err() {
                        return;
                    }
                }
            }
        },
        delay,
    )
}

#[test]
fn a_script_reloaded_reply_by_reply_ends_near_its_wait() {
    let redis = RedisServer::start();
    let proxy = line_by_line_proxy(redis.port(), Duration::from_millis(900));
    // A 2 s wait (no call deadline here); every reply line takes 0.9 s to come back.
    let url = format!("redis://127.0.0.1:{proxy}/0?prefix=slow:&timeout=2");
    let b = backend(&url, OnBackendError::Closed, 1, "slow");
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    redis.cli(&["SCRIPT", "FLUSH"]);
    let started = Instant::now();
    // EVALSHA (NOSCRIPT, 0.9 s), SCRIPT LOAD (two lines, 1.8 s), EVALSHA again: 3.6 s if each
    // read got the whole wait; bounded, the operation gives up after about 2.7 s.
    let outcome = funnel.admit(1, now_ms());
    let took = started.elapsed();
    assert_eq!(
        outcome.err(),
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull)),
        "closed: Redis too slow is refused as full"
    );
    let why = funnel.why_down().unwrap_or_default();
    assert!(why.starts_with("Redis: no answer in time"), "{why}");
    // Between the 2.7 s it takes and the 3.6 s of reads given the whole wait each (a loaded
    // machine's pause may add to the former).
    assert!(
        took <= Duration::from_millis(3400),
        "took {took:?}, more than 1.7 × the 2 s wait"
    );
}

/// A proxy to `port` that holds every chunk Redis sends back for `delay`: a Redis `delay` away.
fn distant_proxy(port: u16, delay: Duration) -> u16 {
    proxy(
        port,
        |mut down_in, mut down_out, delay| {
            let mut buf = [0u8; 16 * 1024];
            while let Ok(n @ 1..) = down_in.read(&mut buf) {
                thread::sleep(delay);
                if down_out.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        },
        delay,
    )
}

/// One admission (given back) of funnel `sap` through a near connection to `url`: the scripts
/// are loaded, so that an admission through a distant proxy is then one round trip.
fn load_scripts(url: &str) {
    let near = backend(url, OnBackendError::Closed, 1, "near");
    drop(
        web_funnel(&near, "sap", 1, Duration::from_secs(10))
            .admit(1, now_ms())
            .unwrap(),
    );
}

/// The handshake (AUTH) is one round trip and SELECT another, each read within what is left of
/// the wait (in one pipeline, redis-rs read each reply with the whole wait: a stalled Redis held
/// the connect for twice its wait). A Redis 100 ms away with a password and a database other
/// than 0 connects and admits (three round trips, 300 ms) within a 700 ms wait: no fallback.
#[test]
fn a_distant_redis_with_a_password_and_a_database_connects_within_its_wait() {
    let redis = RedisServer::start_with(&["--requirepass", "pw"]);
    load_scripts(&format!(
        "redis://:pw@127.0.0.1:{}/2?prefix=far:",
        redis.port()
    ));
    let proxy = distant_proxy(redis.port(), Duration::from_millis(100));
    let url = format!("redis://:pw@127.0.0.1:{proxy}/2?prefix=far:&timeout=0.7");
    let b = backend(&url, OnBackendError::Closed, 1, "far");
    let funnel = web_funnel(&b, "sap", 4, Duration::from_secs(10));
    let started = Instant::now();
    let admitted = funnel.admit(1, now_ms());
    assert!(
        admitted.is_ok(),
        "not admitted after {:?}: {:?}",
        started.elapsed(),
        admitted.err()
    );
}

/// The slot's lease on Redis starts when the admission runs there, not when its reply comes
/// back: a permit lasts the lease less the time the admission took, so that an attempt never
/// outlives its slot. Before, it lasted the whole lease from the reply: with Redis 100 ms away
/// and a lease of 200 ms, an attempt ran 100 ms past its slot, while another process could
/// hold the same slot (two in flight on a funnel of 1).
#[test]
fn a_permit_lasts_the_lease_less_the_admissions_round_trip() {
    let redis = RedisServer::start();
    load_scripts(&format!(
        "redis://127.0.0.1:{}/0?prefix=lease:",
        redis.port()
    ));
    let proxy = distant_proxy(redis.port(), Duration::from_millis(100));
    let url = format!("redis://127.0.0.1:{proxy}/0?prefix=lease:&timeout=1");
    let b = backend(&url, OnBackendError::Closed, 1, "far");
    let funnel = web_funnel(&b, "sap", 1, Duration::from_millis(200));
    let started = Instant::now();
    let permit = funnel.admit(1, now_ms()).expect("admitted");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(100), "{took:?}");
    let lasts = permit.lasts().expect("bounded by its lease");
    assert!(
        lasts <= Duration::from_millis(200).saturating_sub(took) + Duration::from_millis(1),
        "lasts {lasts:?} after an admission of {took:?}"
    );
}

/// A probe's ticket on Redis is given up at the client's `timeout` plus a margin counted from
/// when the admission ran there, and another host may then probe: the probe's attempt lasts
/// its `timeout` less the time its admission took. Before, it lasted the whole `timeout` from
/// the reply, and with Redis 100 ms away each way and a funnel admission after it, two probes
/// were in flight at once across hosts.
#[test]
fn a_probe_lasts_its_timeout_less_the_admissions_round_trip() {
    let redis = RedisServer::start();
    let proxy = distant_proxy(redis.port(), Duration::from_millis(100));
    let url = format!("redis://127.0.0.1:{proxy}/0?prefix=probe:&timeout=1");
    let b = backend(&url, OnBackendError::Closed, 1, "far-probe");
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 4, ms(10_000), ms(100), ms(1_250)).unwrap();
    let store = b.breaker("up", config).unwrap();
    for _ in 0..4 {
        store.record(true, 0, 0, 0);
    }
    thread::sleep(ms(150));
    let guard = BreakerGuard::new(store, &[503], Duration::from_secs(1));
    let started = Instant::now();
    let probe = guard.admit(1, now_ms()).expect("the probe");
    let took = started.elapsed();
    assert!(took >= ms(100), "{took:?}");
    let lasts = probe.lasts().expect("bounded by its ticket");
    assert!(
        lasts <= Duration::from_secs(1).saturating_sub(took) + ms(1),
        "lasts {lasts:?} after an admission of {took:?}"
    );
}
