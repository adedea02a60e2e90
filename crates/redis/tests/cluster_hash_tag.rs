//! Every key of a name shares one Redis Cluster slot, whatever the name holds: the multi-key
//! scripts (a funnel with `share`, three keys) would otherwise be refused with CROSSSLOT.
//! Checked against a one-node cluster (all 16384 slots on it, so every key is served, but a
//! script whose keys hash to different slots is still refused).

mod common;
use common::*;

use std::time::{Duration, Instant};

use resilient_core::FunnelConfig;
use resilient_http::{Backend, OnBackendError};

/// A one-node cluster serving every slot.
fn cluster_node() -> RedisServer {
    let node = RedisServer::start_with(&[
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
    ]);
    assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
    let until = Instant::now() + Duration::from_secs(5);
    while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
        assert!(
            Instant::now() < until,
            "the one-node cluster did not become ok"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    node
}

#[test]
fn a_names_keys_share_one_cluster_slot_whatever_its_braces() {
    let node = cluster_node();
    let url = node.url("ht:");
    let config = FunnelConfig::new(4, 1, Duration::from_secs(10))
        .unwrap()
        .with_share(true)
        .unwrap();
    // `closed`: an admission is granted only when Redis ran the script.
    let b = backend(&url, OnBackendError::Closed, 1, "ht");
    for name in ["plain", "}x", "}", "a}b", "{x}", "50%"] {
        for background in [false, true] {
            let f = b.funnel(name, config, background).unwrap();
            let permit = f.admit(1, now_ms());
            assert!(
                permit.is_ok(),
                "{name:?} (background {background}): refused, CROSSSLOT"
            );
        }
    }
    // Each name's keys, in one slot as the cluster computes it.
    let target = resilient_redis::Target::parse(&url).unwrap();
    for name in ["plain", "}x", "}", "a}b", "{x}", "50%", "}{}"] {
        let slots: Vec<String> = [
            "funnel",
            "funnel:background",
            "breaker:500ms",
            "budget:60000ms:sums",
        ]
        .iter()
        .map(|what| node.cli(&["CLUSTER", "KEYSLOT", &target.key(name, what)]))
        .collect();
        assert!(
            slots.iter().all(|s| *s == slots[0]),
            "{name:?}: keys in slots {slots:?}"
        );
    }
}
