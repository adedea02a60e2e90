//! A Redis Cluster whose nodes change under a running process: a slot resharded while a funnel
//! slot in it is held, and a node that dies and whose slot another node takes over (as after a
//! failover, at another address). The URL names node 0; `on_backend_error` is `open`, so a
//! call that fell back would go through without a slot, which the counts below would see.

mod common;
use common::cluster::*;
use common::*;

use std::sync::Arc;
use std::time::Duration;

use resilient_http::{OnBackendError, Refusal};

/// A slot held on node 1 while its key moves to node 2 goes back on node 2: node 1 answers the
/// release `MOVED`, and the release follows. (Sent again to node 1 instead, it would be refused
/// until the lease ended, and node 2 would count the slot all that time: a full funnel
/// resharded would refuse every call for a whole lease.)
#[test]
fn a_slot_held_while_its_key_moves_is_given_back_where_the_key_went() {
    let _turn = one_at_a_time();
    let nodes = cluster();
    let redis = backend(&url(&nodes[0], "r:"), OnBackendError::Open, 1, "reshard");
    let name = name_on(&nodes, 1);
    let key = format!("r:{{{name}}}:funnel");
    let funnel = web_funnel(&redis, &name, 1, Duration::from_secs(60));
    let held = funnel.admit(1, now_ms()).expect("admitted on node 1");
    assert_eq!(nodes[1].cli(&["ZCARD", &key]), "1");

    move_slot(&nodes, &key, 1, 2);
    assert_eq!(
        nodes[2].cli(&["ZCARD", &key]),
        "1",
        "the holder moved with the key"
    );

    drop(held);
    resilient_redis::release_leftovers(); // request end
    assert_eq!(
        nodes[2].cli(&["ZCARD", &key]),
        "0",
        "the slot was not given back on the node the key moved to"
    );
    let again = funnel.admit(1, now_ms()).expect("admitted on node 2");
    assert_eq!(funnel.admit(1, now_ms()).err(), Some(Refusal::Full));
    assert_eq!(nodes[2].cli(&["ZCARD", &key]), "1", "decided on node 2");
    drop(again);
}

/// Node 1 dies and node 2 takes its slot over: the key's calls are not sent to the dead node
/// for the rest of the process's life. The first call after the death finds it unreachable and
/// falls back; the next asks the URL's node again, which names node 2.
/// (With the default 250 ms for Redis instead of `url`'s 5 s, a stall of node 2 past 250 ms
/// put before the second call fails the test: it falls back for time.)
#[test]
fn a_dead_nodes_keys_go_back_to_the_urls_node() {
    // The other test's `release_leftovers()` could give back this one's slot (ZCARD 0 on node 2,
    // as in a CI run that failed).
    let _turn = one_at_a_time();
    let mut nodes = cluster();
    let fallbacks = Arc::new(Fallbacks::default());
    let redis = backend(&url(&nodes[0], "d:"), OnBackendError::Open, 1, "dead")
        .with_events(fallbacks.clone());
    let name = name_on(&nodes, 1);
    let key = format!("d:{{{name}}}:funnel");
    let funnel = web_funnel(&redis, &name, 1, Duration::from_secs(60));
    drop(
        funnel
            .admit(1, now_ms())
            .expect("admitted on node 1: learnt"),
    );

    nodes[1].kill();
    let slot = nodes[0].cli(&["CLUSTER", "KEYSLOT", &key]);
    let id = nodes[2].cli(&["CLUSTER", "MYID"]);
    for n in [0, 2] {
        assert_eq!(
            nodes[n].cli(&["CLUSTER", "SETSLOT", &slot, "NODE", &id]),
            "OK"
        );
    }

    let first = funnel.admit(1, now_ms()); // node 1 unreachable: falls back (open)
    assert_eq!(
        fallbacks.count(),
        1,
        "the dead node's call did not fall back"
    );
    let held = funnel.admit(1, now_ms()).expect("admitted");
    assert_eq!(
        fallbacks.count(),
        1,
        "the call after the death fell back (the dead node asked again, or no answer in 5 s)"
    );
    assert_eq!(
        nodes[2].cli(&["ZCARD", &key]),
        "1",
        "the call was decided, but not on node 2"
    );
    assert_eq!(funnel.admit(1, now_ms()).err(), Some(Refusal::Full));
    drop((first, held));
}
