//! Fork safety: after the parent used its runtime and kept a connection alive, a forked child
//! gets its own runtime and client (keyed by pid), its calls work, and neither process hangs.

#[path = "support/json.rs"]
mod json;

use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_http::process_io;
use resilient_http::{CallEnv, Caps, HttpClient, RequestOptions, SystemClock, TokioSleeper};
use resilient_upstream::Upstream;
use serde_json::json;

fn get(base: &str) -> Result<u16, String> {
    let io = process_io()?;
    let env = CallEnv::new(
        Arc::new(SystemClock),
        Arc::new(TokioSleeper),
        io.transport(),
    );
    let config = json::config(&json!({"base_url": base, "deadline": 3}));
    let c = HttpClient::new(config, Caps::default(), env);
    let req = c
        .prepare("GET", "/ping", RequestOptions::new())
        .map_err(|e| e.to_string())?;
    io.block_on(c.call(c.env().clone(), req, None))
        .map(|r| r.status())
        .map_err(|e| e.to_string())
}

#[test]
fn a_forked_child_gets_its_own_runtime_and_both_keep_working() {
    let up = Upstream::start().unwrap();
    let base = up.key_url("fork");
    assert_eq!(get(&base), Ok(200));
    let parent_pid = process_io().unwrap().pid();

    // SAFETY: the child only makes one call with a fresh runtime and leaves with _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        let ok = process_io()
            .map(|io| io.pid() != parent_pid)
            .unwrap_or(false)
            && get(&base) == Ok(200)
            && get(&base) == Ok(200);
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let started = Instant::now();
    let mut status = 0;
    loop {
        let r = unsafe { libc::waitpid(child, &mut status, libc::WNOHANG) };
        if r == child {
            break;
        }
        if started.elapsed() > Duration::from_secs(10) {
            unsafe { libc::kill(child, libc::SIGKILL) };
            panic!("the child hung");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
    // The parent's runtime and its kept-alive connection still work.
    assert_eq!(process_io().unwrap().pid(), parent_pid);
    assert_eq!(get(&base), Ok(200));
}

/// The request-end ledger of attempts in flight belongs to the process that sent them: a child
/// of `pcntl_fork` neither ends the parent's attempts (the shared gauge would count them out
/// twice) nor loses its own.
#[test]
fn a_forked_child_never_ends_the_parents_attempts() {
    use resilient_http::{end_open_attempts, CallEvents, MetricsEvents};
    let path =
        std::env::temp_dir().join(format!("resilient-fork-ledger-{}.shm", std::process::id()));
    let _ = std::fs::remove_file(&path);
    let seg = Arc::new(resilient_core::Segment::open(&path, 8).unwrap());
    let _ = std::fs::remove_file(&path);
    let metrics = resilient_core::Metrics::new(seg, "ledger").unwrap();
    let events = MetricsEvents::new(metrics.clone());
    let permit = events.attempt_sent(1);
    assert_eq!(metrics.snapshot().in_flight, 1);

    // SAFETY: the child only reads and writes the shared segment and leaves with _exit.
    let child = unsafe { libc::fork() };
    assert!(child >= 0);
    if child == 0 {
        let parents_left_alone = end_open_attempts() == 0 && metrics.snapshot().in_flight == 1;
        let own = events.attempt_sent(1);
        std::mem::forget(own);
        let own_ended = end_open_attempts() == 1 && metrics.snapshot().in_flight == 1;
        unsafe {
            libc::_exit(if parents_left_alone && own_ended {
                0
            } else {
                1
            })
        };
    }
    let mut status = 0;
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "child failed: {status}"
    );
    assert_eq!(
        metrics.snapshot().in_flight,
        1,
        "the parent's attempt is still in flight"
    );
    drop(permit);
    assert_eq!(metrics.snapshot().in_flight, 0);
    assert_eq!(end_open_attempts(), 0);
}
