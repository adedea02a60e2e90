//! A process stopped and continued while it waits for Redis (SIGSTOP and SIGCONT, a debugger,
//! a container paused and unpaused): Linux ends a socket read that has a timeout with EINTR
//! then, whatever the signal mask, and the read is not restarted. Redis is fine; only this
//! connection is out of step. (A binary of its own: the stop stops every thread of it.)

mod common;
use common::*;

use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use resilient_http::OnBackendError;

/// The admission is sent again on a new connection (it is idempotent by its token) and the
/// next one goes to Redis at once: no fallback, no back-off, one slot held. Before, the stop
/// was taken for Redis failing: the admission refused (`closed`) and the back-off refused the
/// next ones too.
#[test]
fn an_admission_whose_process_was_stopped_and_continued_is_sent_again() {
    let redis = RedisServer::start();
    let url = format!("{}&timeout=2", redis.url("stop:"));
    let b = backend(&url, OnBackendError::Closed, 1, "stop");
    let f = web_funnel(&b, "up", 4, Duration::from_secs(10));
    drop(until_ok("never admitted", || f.admit(1, now_ms()))); // connected, script loaded

    // Redis busy for 1 s; this process stopped 200 ms into it, for 50 ms, while its admission
    // waits for the reply. The stopper writes when it stops us (ns since the epoch).
    let stalled = stall(redis.port(), 1000);
    let pid = std::process::id();
    let stopped_at = std::env::temp_dir().join(format!("resilient-stopped-{pid}"));
    let mut stopper = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "sleep 0.2; date +%s%N > {}; kill -STOP {pid}; sleep 0.05; kill -CONT {pid}",
            stopped_at.display()
        ))
        .spawn()
        .unwrap();
    let admitted = f.admit(1, now_ms());
    let returned = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    assert!(stopper.wait().unwrap().success());
    stalled.join().unwrap();
    let stopped: u128 = std::fs::read_to_string(&stopped_at)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let _ = std::fs::remove_file(&stopped_at);
    assert!(
        stopped < returned.as_nanos(),
        "the stop came after the admission returned: nothing was tested"
    );
    let permit = admitted.expect("admitted on Redis after the stop");
    let next = f.admit(1, now_ms()).expect("no back-off");
    assert_eq!(
        redis.cli(&["ZCARD", "stop:{up}:funnel"]),
        "2",
        "one slot for the admission sent twice"
    );
    drop((permit, next));
    until_ok("a slot not given back", || {
        match redis.cli(&["ZCARD", "stop:{up}:funnel"]).as_str() {
            "0" => Ok(()),
            n => Err(n.to_owned()),
        }
    });
}
