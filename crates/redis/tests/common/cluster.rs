//! A Redis Cluster of three masters on loopback, slots split evenly, for the redirection tests.

use std::time::{Duration, Instant};

use super::RedisServer;

/// Three cluster nodes sharing the 16384 slots, each knowing the others.
pub fn cluster() -> [RedisServer; 3] {
    let args = [
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ];
    let nodes = [
        RedisServer::start_with(&args),
        RedisServer::start_with(&args),
        RedisServer::start_with(&args),
    ];
    for (node, (first, last)) in
        nodes
            .iter()
            .zip([("0", "5460"), ("5461", "10922"), ("10923", "16383")])
    {
        assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", first, last]), "OK");
    }
    for other in &nodes[1..] {
        let port = other.port().to_string();
        // The node's bus port is its own (see `RedisServer::start_with`), so MEET names it.
        let bus = other.cli(&["CONFIG", "GET", "cluster-port"]);
        let bus = bus.lines().nth(1).expect("cluster-port");
        assert_eq!(
            nodes[0].cli(&["CLUSTER", "MEET", "127.0.0.1", &port, bus]),
            "OK"
        );
    }
    // Setting up, not what is tested: the nodes' gossip on a busy 2-core CI machine took over
    // 10 s once (every later step has bounds of its own).
    let until = Instant::now() + Duration::from_secs(30);
    while !nodes.iter().all(|n| {
        let info = n.cli(&["CLUSTER", "INFO"]);
        info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3")
    }) {
        assert!(Instant::now() < until, "the cluster did not become ok");
        std::thread::sleep(Duration::from_millis(20));
    }
    nodes
}

/// The URL of `node` with `prefix`, giving Redis 5 s (`timeout`) instead of the default 250 ms:
/// a node saves its cluster configuration with an fsync after `SETSLOT`, which a busy disk
/// (a CI run) can stretch, and a call to it would then fall back for time rather than show
/// where it was decided.
pub fn url(node: &RedisServer, prefix: &str) -> String {
    format!("{}&timeout=5", node.url(prefix))
}

/// The index of the node serving `key`'s slot.
pub fn owner(nodes: &[RedisServer; 3], key: &str) -> usize {
    let slot: u32 = nodes[0].cli(&["CLUSTER", "KEYSLOT", key]).parse().unwrap();
    match slot {
        0..=5460 => 0,
        5461..=10922 => 1,
        _ => 2,
    }
}

/// A name whose keys (`prefix{name}:…`) the node `want` serves.
pub fn name_on(nodes: &[RedisServer; 3], want: usize) -> String {
    (0..)
        .map(|i| format!("n{i}"))
        .find(|name| owner(nodes, &format!("{{{name}}}")) == want)
        .unwrap()
}

/// Moves `key`'s slot, with the keys in it, from node `from` to node `to`, as
/// `redis-cli --cluster reshard` does (IMPORTING / MIGRATING, MIGRATE, then the new owner told
/// to every node).
pub fn move_slot(nodes: &[RedisServer; 3], key: &str, from: usize, to: usize) {
    let (slot, to_id) = migrate_keys(nodes, key, from, to);
    for node in nodes {
        assert_eq!(
            node.cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]),
            "OK"
        );
    }
}

/// The first half of [`move_slot`]: `key`'s slot marked migrating from node `from` to node
/// `to` and its keys moved there, the owner not told yet: node `from` answers a command on one
/// of those keys with `ASK`. Returns the slot and node `to`'s id.
pub fn migrate_keys(
    nodes: &[RedisServer; 3],
    key: &str,
    from: usize,
    to: usize,
) -> (String, String) {
    let slot = nodes[0].cli(&["CLUSTER", "KEYSLOT", key]);
    let from_id = nodes[from].cli(&["CLUSTER", "MYID"]);
    let to_id = nodes[to].cli(&["CLUSTER", "MYID"]);
    assert_eq!(
        nodes[to].cli(&["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]),
        "OK"
    );
    assert_eq!(
        nodes[from].cli(&["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]),
        "OK"
    );
    let keys = nodes[from].cli(&["CLUSTER", "GETKEYSINSLOT", &slot, "100"]);
    for k in keys.lines().filter(|k| !k.is_empty()) {
        let port = nodes[to].port().to_string();
        assert_eq!(
            nodes[from].cli(&["MIGRATE", "127.0.0.1", &port, k, "0", "5000"]),
            "OK"
        );
    }
    (slot, to_id)
}
