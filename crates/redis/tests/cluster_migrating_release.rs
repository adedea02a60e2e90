//! A release answered `ASK` (its key moved to another node in the middle of a slot's migration)
//! is no failure of the node: the node's other names go on being decided there, none falls
//! back. A release Redis refuses for good (an ACL's NOPERM) fails the operation that carried it
//! (`release_refused_falls_back.rs`); a cluster's ASK, TRYAGAIN or CLUSTERDOWN must not, or
//! every key of the node would follow `on_backend_error` while one slot migrates.

mod common;
use common::cluster::*;
use common::*;

use std::time::Duration;

use resilient_http::OnBackendError;

#[test]
fn a_release_answered_ask_holds_no_other_name_back() {
    let nodes = cluster();
    // `closed`: a call that fell back would be refused.
    let redis = backend(
        &url(&nodes[1], "a:"),
        OnBackendError::Closed,
        1,
        "cluster-ask",
    );
    let lease = Duration::from_secs(10);
    let (b, c) = {
        let mut names = (0..)
            .map(|i| format!("n{i}"))
            .filter(|name| owner(&nodes, &format!("{{{name}}}")) == 1);
        (names.next().unwrap(), names.next().unwrap())
    };
    let b_key = format!("a:{{{b}}}:funnel");
    let (b_funnel, c_funnel) = (
        web_funnel(&redis, &b, 2, lease),
        web_funnel(&redis, &c, 2, lease),
    );
    let held = b_funnel.admit(1, now_ms()).expect("b admitted on node 1");

    // b's slot migrating from node 1 to node 2, its key moved already: node 1 answers b's
    // release with ASK.
    migrate_keys(&nodes, &b_key, 1, 2);
    drop(held); // its ZREM goes with c's next admission, and is answered ASK

    for i in 0..10 {
        drop(c_funnel.admit(1, now_ms()).unwrap_or_else(|e| {
            panic!("c's call {i} fell back ({e:?}): b's ASK held node 1 back")
        }));
        std::thread::sleep(Duration::from_millis(10));
    }
}
