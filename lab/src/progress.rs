//! The progress line while a variant runs: phase, a bar, sent/answered counts, pending requests,
//! FPM busy workers and the upstream queue. Redrawn in place on a terminal, a plain line every
//! 5 s otherwise (CI logs).

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use crate::loadgen::Counters;
use crate::params::Params;
use crate::sampler::Sample;

pub async fn run(
    p: Params,
    variant: String,
    t0: Instant,
    counters: Arc<Counters>,
    latest: Arc<Mutex<Sample>>,
    stop: Arc<AtomicBool>,
) {
    let tty = std::io::stderr().is_terminal();
    let period = if tty {
        Duration::from_millis(250)
    } else {
        Duration::from_secs(5)
    };
    let total = p.total_secs();
    while !stop.load(Relaxed) {
        tokio::time::sleep(period).await;
        let t = (Instant::now() - t0).as_secs_f64();
        let names = p.phase_names();
        let phase = if t >= total {
            "drain"
        } else {
            &names[((t / p.phase_secs) as usize).min(names.len() - 1)]
        };
        let width = 30usize;
        let filled = ((t / total).min(1.0) * width as f64) as usize;
        let bar: String = "#".repeat(filled) + &".".repeat(width - filled);
        let s = latest.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let opt = |v: Option<u32>| v.map(|x| x.to_string()).unwrap_or_else(|| "?".into());
        let line = format!(
            "[{variant:>9}] {phase:<12} [{bar}] {t:5.1}/{total:.0}s sent {} live {} fallback {} err {} pending {} | fpm busy {}/{} queue {} | upstream {} in service, {} queued",
            counters.sent.load(Relaxed),
            counters.live.load(Relaxed),
            counters.fallback.load(Relaxed),
            counters.errors.load(Relaxed),
            counters.pending(),
            opt(s.fpm_active),
            p.workers,
            opt(s.fpm_listen_queue),
            opt(s.upstream_in_service),
            opt(s.upstream_queued),
        );
        let mut err = std::io::stderr().lock();
        if tty {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
    }
    if tty {
        let _ = writeln!(std::io::stderr());
    }
}
