//! Records sent without waiting for their replies (a budget's originals): what a restart, a
//! Redis that refuses them, or a script flush costs, and no more.

mod common;
use common::*;

use std::time::Duration;

use resilient_core::{Admission, BreakerConfig, BudgetConfig};
use resilient_http::{Backend, OnBackendError};

/// A restart of Redis between two calls of a busy process (the connection used less than a
/// second before, so no idle PING): the next call's record is written into the dead connection
/// (the write succeeds; that original is lost), and the breaker's admission right after it
/// finds the drop while reading the record's reply, before its own: Redis never read the
/// admission, so it goes again on a new connection rather than falling back (with `closed`,
/// the call would be refused).
#[test]
fn a_restart_found_behind_a_record_sends_the_next_command_again() {
    let mut redis = RedisServer::start();
    let b = backend(&redis.url("ra1:"), OnBackendError::Closed, 1, "ra1");
    let ms = Duration::from_millis;
    let breaker = b
        .breaker(
            "up",
            BreakerConfig::new(0.5, 4, ms(10_000), ms(1000), ms(1000)).unwrap(),
        )
        .unwrap();
    let budget = b
        .budget(
            "up",
            BudgetConfig::new(0.1, 5, Duration::from_secs(10)).unwrap(),
        )
        .unwrap();
    // A call: record, breaker admission.
    budget.record_original(now_ms());
    assert_eq!(breaker.admit(now_ms()), Admission::Closed);
    redis.kill();
    redis.restart();
    std::thread::sleep(ms(20)); // past the breaker's 5 ms reuse
                                // The next call (well within IDLE_CHECK of the last use).
    budget.record_original(now_ms());
    assert_eq!(
        breaker.admit(now_ms()),
        Admission::Closed,
        "the admission fell back (closed: refused) after a restart found behind a record"
    );
}

/// Redis refusing every record with an error (here READONLY: the URL's server became a
/// replica after a failover; NOPERM, MISCONF, OOM alike; a cluster's MOVED teaches the key's
/// node instead): once a refusal is read, the next records wait for their replies, so each
/// refused one falls back to the local budget (`local`), with the back-off and report of any
/// failed command. At most the records sent before the first refusal was read are lost.
#[test]
fn originals_refused_by_redis_fall_back_to_the_local_budget() {
    let primary = RedisServer::start();
    let replica = RedisServer::start();
    replica.cli(&["REPLICAOF", "127.0.0.1", &primary.port().to_string()]);
    let b = backend(&replica.url("ro2:"), OnBackendError::Local, 1, "ro2");
    let budget = b
        .budget(
            "up",
            BudgetConfig::new(1.0, 0, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    for _ in 0..100 {
        budget.record_original(now_ms());
        std::thread::sleep(Duration::from_millis(2));
    }
    let allowed = (0..150).filter(|_| budget.try_consume(now_ms())).count();
    assert!(
        allowed >= 100 - 16,
        "{allowed} retries allowed for 100 originals at ratio 1.0: more than the 16 records \
         sent before the first refusal was read were counted nowhere"
    );
}

/// SCRIPT FLUSH on a live connection: at most 16 records per process are lost (those written
/// before a NOSCRIPT reply is read; the 17th is written after the replies are read, so after
/// the script is loaded again).
#[test]
fn a_script_flush_loses_at_most_16_records() {
    let redis = RedisServer::start();
    let budget = backend(&redis.url("fl3:"), OnBackendError::Closed, 1, "fl3")
        .budget(
            "up",
            BudgetConfig::new(1.0, 0, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
    budget.record_original(0); // loads the script
    assert!(budget.try_consume(0)); // every reply read
    assert_eq!(redis.cli(&["SCRIPT", "FLUSH"]), "OK");
    for _ in 0..20 {
        budget.record_original(0);
    }
    let allowed = (0..30).filter(|_| budget.try_consume(0)).count();
    assert!(
        allowed >= 20 - 16,
        "{allowed} of the 20 records after the flush counted: more than 16 lost"
    );
}
