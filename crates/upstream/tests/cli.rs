//! The binary: announces its port, serves, exits cleanly on SIGTERM, and closes connections
//! that do not send a request's headers in time.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn prints_its_port_writes_the_port_file_and_exits_on_sigterm() {
    let port_file = std::env::temp_dir().join(format!(
        "resilient-upstream-test-{}.port",
        std::process::id()
    ));
    let (mut child, addr) = start(&[
        "--capacity",
        "3",
        "--service-ms",
        "5",
        "--port-file",
        port_file.to_str().unwrap(),
    ]);
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
    // A service time past the bound the control endpoint keeps (a request holding its slot
    // for years, before).
    let out = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
        .args(["--service-ms", "18446744073709551615"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("at most 600000"));
}

/// The binary on a free port with `args`; its address.
fn start(args: &[&str]) -> (Child, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening ")
        .unwrap_or_else(|| {
            let _ = child.kill();
            panic!("no listening line: {line:?}")
        })
        .parse()
        .unwrap();
    (child, addr)
}

/// Seconds until the server closes `s` (whatever it sends before), at most 5.
fn closed_after(mut s: TcpStream) -> f64 {
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let t = Instant::now();
    let mut sink = Vec::new();
    match s.read_to_end(&mut sink) {
        Ok(_) => t.elapsed().as_secs_f64(),
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => t.elapsed().as_secs_f64(),
        Err(e) => panic!(
            "still open after 5 s ({e}); got {:?}",
            String::from_utf8_lossy(&sink)
        ),
    }
}

#[test]
fn connections_that_do_not_send_their_headers_in_time_are_closed() {
    let (mut child, addr) = start(&["--header-timeout-ms", "300"]);
    // Partial headers, then nothing.
    let mut partial = TcpStream::connect(addr).unwrap();
    partial
        .write_all(b"GET /sim/quote HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    // Connected, never a byte.
    let silent = TcpStream::connect(addr).unwrap();
    // One request answered, then idle on the kept-alive connection.
    let mut idle = common::Conn::open(addr);
    assert_eq!(idle.call("GET", "/sim/quote", &[], b"").status, 200);
    let idle = idle.stream().try_clone().unwrap();

    for (what, s) in [
        ("partial headers", partial),
        ("silent", silent),
        ("idle", idle),
    ] {
        let secs = closed_after(s);
        assert!(secs < 2.0, "{what}: closed after {secs:.2} s");
    }
    // A client that sends its request in time is served as before.
    assert_eq!(common::get(addr, "/sim/quote").status, 200);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn the_header_timeout_must_be_positive() {
    for bad in ["0", "-1", "x"] {
        let out = Command::new(env!("CARGO_BIN_EXE_resilient-upstream"))
            .args(["--header-timeout-ms", bad])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--header-timeout-ms"));
    }
}
