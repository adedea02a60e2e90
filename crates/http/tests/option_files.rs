//! Files named by options (`verify`, `cert`, `ssl_key`, `sink`) are checked before anything is
//! sent, and a check never hangs nor reads without bound: a FIFO as a PEM file, a sink FIFO
//! without a reader (whose open would wait for one) and a file too big to be a PEM bundle are
//! refused at once, naming the option.

use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use resilient_http::{RequestOptions, TransportOptions};

fn scratch(tag: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("resilient-optfile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

fn fifo(tag: &str) -> PathBuf {
    let p = scratch(tag);
    let made = std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap();
    assert!(made.success());
    p
}

/// `f`'s result within 5 s, or a failure naming what hung (the thread is left behind).
fn within_5s<T: Send + 'static>(what: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(5))
        .unwrap_or_else(|_| panic!("{what}: still waiting after 5 s"))
}

#[test]
fn a_fifo_named_as_a_ca_bundle_is_refused_at_once() {
    let p = fifo("ca");
    let path = p.clone();
    let e = within_5s("verify => a FIFO", move || {
        TransportOptions::default()
            .set_ca_bundle(&path)
            .unwrap_err()
            .to_string()
    });
    assert!(
        e.starts_with("option 'verify'") && e.contains("not a regular file"),
        "{e}"
    );
    std::fs::remove_file(p).unwrap();
}

#[test]
fn a_fifo_named_as_a_sink_is_refused_at_once() {
    let p = fifo("sink");
    let path = p.clone();
    let e = within_5s("sink => a FIFO", move || {
        RequestOptions::new()
            .sink(path)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    });
    assert!(
        e.starts_with("option 'sink'") && e.contains("FIFO") && e.contains("no reader"),
        "{e}"
    );
    std::fs::remove_file(p).unwrap();
}

#[test]
fn a_file_too_big_for_a_pem_bundle_is_refused_unread() {
    let p = scratch("big");
    let f = std::fs::File::create(&p).unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: 1 GiB that takes no disk
    let e = TransportOptions::default()
        .set_ca_bundle(&p)
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("option 'verify'") && e.contains("larger than"),
        "{e}"
    );
    std::fs::remove_file(p).unwrap();
}

#[test]
fn a_character_device_and_a_fifo_with_a_reader_are_still_sinks() {
    // `'sink' => '/dev/null'` throws a body away; `/dev/stdout` piped to `jq` is a FIFO.
    assert!(RequestOptions::new()
        .sink(Path::new("/dev/null").into())
        .is_ok());
    let p = fifo("read");
    // The reader's own open must not wait for a writer either.
    let reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&p)
        .unwrap();
    assert!(RequestOptions::new().sink(p.clone()).is_ok());
    drop(reader);
    std::fs::remove_file(p).unwrap();
}
