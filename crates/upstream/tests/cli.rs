//! The binary: announces its port, serves, and exits cleanly on SIGTERM.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn prints_its_port_writes_the_port_file_and_exits_on_sigterm() {
    let port_file = std::env::temp_dir().join(format!(
        "resilient-upstream-test-{}.port",
        std::process::id()
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--capacity",
            "3",
            "--service-ms",
            "5",
            "--port-file",
        ])
        .arg(&port_file)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr: std::net::SocketAddr = line
        .trim()
        .strip_prefix("listening ")
        .expect("listening line")
        .parse()
        .unwrap();
    let port: u16 = std::fs::read_to_string(&port_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert_eq!(port, addr.port());
    let cfg = common::get(addr, "/__control/sim").json();
    assert_eq!(
        (cfg["capacity"].as_u64(), cfg["service_ms"].as_u64()),
        (Some(3), Some(5))
    );
    assert_eq!(common::get(addr, "/sim/quote").status, 200);

    let _idle = common::Conn::open(addr); // an open keep-alive connection must not block exit
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("did not exit within 5 s of SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!port_file.exists(), "port file removed on exit");
}

#[test]
fn refuses_bad_arguments() {
    let out = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
        .args(["--capacity", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--capacity"));
    let out = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
        .args(["--listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}
