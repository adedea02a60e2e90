//! `rediss://`: TLS (rustls) against a redis-server with a TLS port, its certificate issued by a
//! throw-away CA made with the `openssl` CLI; trusted through the URL's `ca` parameter, refused
//! without it (the webpki roots do not know that CA).

use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_core::{FunnelConfig, Segment};
use resilient_http::{Backend, OnBackendError, Refusal, SharedMemory, UnavailableKind};
use resilient_redis::{Redis, Server, Target};

fn openssl(dir: &Path, args: &[&str]) {
    let ok = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("openssl on PATH")
        .success();
    assert!(ok, "openssl {args:?}");
}

#[test]
fn rediss_with_a_private_ca() {
    let dir = std::env::temp_dir().join(format!("resilient-redis-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    openssl(
        &dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "1",
            "-subj",
            "/CN=resilient-test-ca",
        ],
    );
    openssl(
        &dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "srv.key",
            "-out",
            "srv.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
    )
    .unwrap();
    openssl(
        &dir,
        &[
            "x509",
            "-req",
            "-in",
            "srv.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "srv.pem",
            "-days",
            "1",
            "-extfile",
            "ext.cnf",
        ],
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = Command::new("redis-server")
        .args([
            "--port",
            "0",
            "--bind",
            "127.0.0.1",
            "--tls-port",
            &port.to_string(),
        ])
        .args([
            "--tls-cert-file",
            "srv.pem",
            "--tls-key-file",
            "srv.key",
            "--tls-ca-cert-file",
            "ca.pem",
        ])
        .args([
            "--tls-auth-clients",
            "no",
            "--save",
            "",
            "--appendonly",
            "no",
        ])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .spawn()
        .expect("redis-server on PATH");
    let until = Instant::now() + Duration::from_secs(5);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < until, "redis-server (TLS) did not start");
        std::thread::sleep(Duration::from_millis(10));
    }
    let seg_path = dir.join("seg.shm");
    let seg = Arc::new(Segment::open(&seg_path, 8).unwrap());
    let funnel = |url: &str| {
        let local: Arc<dyn Backend> = Arc::new(SharedMemory::new(seg.clone()));
        let server = Arc::new(Server::new(Target::parse(url).unwrap()).unwrap());
        Redis::new(server, OnBackendError::Closed, 1, Some(local))
            .funnel(
                "sap",
                FunnelConfig::new(2, 0, Duration::from_secs(5)).unwrap(),
                false,
            )
            .unwrap()
    };
    let ca = dir.join("ca.pem");
    let trusted = funnel(&format!("rediss://127.0.0.1:{port}/0?ca={}", ca.display()));
    let untrusted = funnel(&format!("rediss://127.0.0.1:{port}/0"));
    let now = resilient_core::clock::monotonic_ms();
    let results = (
        trusted.admit(1, now).is_ok(),
        trusted.admit(1, now).is_ok(),
        trusted.admit(1, now + 100).err(),
    );
    static REPORTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
    resilient_redis::report_to(|line| REPORTS.lock().unwrap().push(line.to_owned()));
    let refused = untrusted.admit(1, now).err();
    // A plain redis:// URL pointed at the TLS port: the handshake never completes.
    let plain = funnel(&format!("redis://127.0.0.1:{port}/0?timeout=0.3"));
    let plain_refused = plain.admit(1, now).err();
    // By host name: looked up within the wait, then the certificate checked against the name.
    let by_name = funnel(&format!("rediss://localhost:{port}/0?ca={}", ca.display()));
    let by_name_admitted = by_name.admit(1, now + 200).is_ok();
    let reports = REPORTS.lock().unwrap().clone();
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        results,
        (true, true, Some(Refusal::Full)),
        "the limit of 2, over TLS"
    );
    assert_eq!(
        refused,
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull)),
        "an unknown CA: no connection, 'closed'"
    );
    assert_eq!(
        plain_refused,
        Some(Refusal::BackendDown(UnavailableKind::FunnelFull))
    );
    assert!(
        by_name_admitted,
        "rediss://localhost, its certificate naming localhost"
    );
    // A misconfiguration is never silent: the certificate the server showed was not trusted.
    assert!(
        reports.iter().any(|r| r.contains("certificate")),
        "{reports:?}"
    );
}
