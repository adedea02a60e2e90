//! A process that uses many backend URLs (a key prefix per tenant, say) keeps a bounded number
//! of Redis connections: one per URL, each kept for the life of the process, held a file
//! descriptor and one of Redis's `maxclients` per URL ever used, in every FPM worker.

use std::time::Duration;

use resilient_core::{BudgetConfig, FunnelConfig};
use resilient_http::{Backend, OnBackendError};
use resilient_redis::{Redis, Server, MAX_IDLE_SERVERS};

mod common;
use common::{now_ms, RedisServer};

/// This process's connections to `redis` (each a line of `CLIENT LIST`, less redis-cli's own).
fn connections(redis: &RedisServer) -> usize {
    redis.cli(&["CLIENT", "LIST"]).lines().count() - 1
}

#[test]
fn connections_to_many_urls_stay_bounded() {
    let redis = RedisServer::start();
    let config = BudgetConfig::new(0.1, 1, Duration::from_secs(1)).unwrap();
    for i in 0..3 * MAX_IDLE_SERVERS {
        // As a request does: a backend for the client's URL, used, then dropped.
        let server = Server::shared(&redis.url(&format!("tenant{i}:"))).unwrap();
        let backend = Redis::new(server, OnBackendError::Closed, 1, None);
        let budget = backend.budget("calls", config).unwrap();
        budget.record_original(now_ms());
        assert!(budget.try_consume(now_ms()), "tenant {i}: Redis answers");
    }
    let open = connections(&redis);
    assert!(
        open <= MAX_IDLE_SERVERS,
        "{open} connections after {} URLs, at most {MAX_IDLE_SERVERS} kept",
        3 * MAX_IDLE_SERVERS
    );
    // Every decision counted under its own prefix.
    let keys = redis.cli(&["KEYS", "tenant*"]);
    assert_eq!(keys.lines().count(), 3 * MAX_IDLE_SERVERS, "{keys}");
    // A URL used again is served again (on a new connection if its own was let go).
    let server = Server::shared(&redis.url("tenant0:")).unwrap();
    let backend = Redis::new(server, OnBackendError::Closed, 1, None);
    let budget = backend.budget("again", config).unwrap();
    assert!(budget.try_consume(now_ms()), "Redis answers tenant 0 again");
}

/// The same with a funnel: a release is written without waiting for its reply, read with the
/// next command on that URL, which never comes when each URL is used once (a queue worker's
/// tenants, one job each): the release's entry held its server, so no connection was let go
/// (one file descriptor and one Redis client per URL ever used, 300 after 300 URLs).
#[test]
fn connections_to_many_urls_of_funnels_stay_bounded() {
    let redis = RedisServer::start();
    let config = FunnelConfig::new(4, 0, Duration::from_secs(60)).unwrap();
    for i in 0..3 * MAX_IDLE_SERVERS {
        let server = Server::shared(&redis.url(&format!("ftenant{i}:"))).unwrap();
        let backend = Redis::new(server, OnBackendError::Closed, 1, None);
        let funnel = backend.funnel("calls", config, false).unwrap();
        drop(funnel.admit(1, now_ms()).expect("Redis answers"));
    }
    let open = connections(&redis);
    assert!(
        open <= MAX_IDLE_SERVERS + 1,
        "{open} connections after {} URLs, at most {MAX_IDLE_SERVERS} kept",
        3 * MAX_IDLE_SERVERS
    );
    // Every slot given back (the releases' replies read before their connections closed).
    for i in 0..3 * MAX_IDLE_SERVERS {
        let held = redis.cli(&["ZCARD", &format!("ftenant{i}:{{calls}}:funnel")]);
        assert!(held == "0", "tenant {i}: {held} held");
    }
}
