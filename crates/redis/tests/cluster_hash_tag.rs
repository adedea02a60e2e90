//! Every key of a name shares one Redis Cluster slot, whatever the name holds: the multi-key
//! scripts (a funnel with `share`, three keys) would otherwise be refused with CROSSSLOT.
//! Checked against a one-node cluster (all 16384 slots on it, so every key is served, but a
//! script whose keys hash to different slots is still refused).

mod common;
use common::*;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use resilient_core::FunnelConfig;
use resilient_http::{Backend, OnBackendError};

struct ClusterNode {
    child: Child,
    port: u16,
    dir: std::path::PathBuf,
}

impl ClusterNode {
    fn start() -> ClusterNode {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = std::env::temp_dir().join(format!(
            "resilient-redis-cluster-{}-{port}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--cluster-enabled",
                "yes",
            ])
            .args(["--cluster-config-file", "nodes.conf", "--dir"])
            .arg(&dir)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let node = ClusterNode { child, port, dir };
        let until = Instant::now() + Duration::from_secs(5);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
        assert_eq!(node.cli(&["CLUSTER", "ADDSLOTSRANGE", "0", "16383"]), "OK");
        while !node.cli(&["CLUSTER", "INFO"]).contains("cluster_state:ok") {
            assert!(
                Instant::now() < until,
                "the one-node cluster did not become ok"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        node
    }

    fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

impl Drop for ClusterNode {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_names_keys_share_one_cluster_slot_whatever_its_braces() {
    let node = ClusterNode::start();
    let url = format!("redis://127.0.0.1:{}/0?prefix=ht:", node.port);
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
        let slots: Vec<String> = ["funnel", "funnel:background", "breaker", "budget:60000ms"]
            .iter()
            .map(|what| node.cli(&["CLUSTER", "KEYSLOT", &target.key(name, what)]))
            .collect();
        assert!(
            slots.iter().all(|s| *s == slots[0]),
            "{name:?}: keys in slots {slots:?}"
        );
    }
}
