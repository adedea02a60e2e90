//! A process that uses many backend URLs (a key prefix per tenant, say) keeps a bounded number
//! of Redis connections: one per URL, each kept for the life of the process, held a file
//! descriptor and one of Redis's `maxclients` per URL ever used, in every FPM worker.

use std::time::Duration;

use resilient_core::BudgetConfig;
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
