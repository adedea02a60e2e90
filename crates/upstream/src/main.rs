//! `resilient-upstream --listen 127.0.0.1:0 [--port-file PATH] [--capacity N] [--service-ms MS]`
//!
//! Prints `listening 127.0.0.1:PORT` once bound, writes the port to `--port-file` (atomically,
//! removed again on exit), and runs until SIGTERM or SIGINT. `--header-timeout-ms` closes a
//! connection that does not send a request's headers in time (default 60 s; also the longest
//! idle keep-alive).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use resilient_upstream::{serve_with, App, SimConfig, HEADER_READ_TIMEOUT};
use tokio::net::TcpListener;
use tokio::signal::unix::{signal, SignalKind};

const USAGE: &str = "usage: resilient-upstream [--listen 127.0.0.1:0] [--port-file PATH] [--capacity N] [--service-ms MS] [--fail-ratio R] [--fail-status S] [--header-timeout-ms MS]";

struct Args {
    listen: SocketAddr,
    port_file: Option<PathBuf>,
    sim: SimConfig,
    header_read_timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        listen: "127.0.0.1:0".parse().unwrap(),
        port_file: None,
        sim: SimConfig::default(),
        header_read_timeout: HEADER_READ_TIMEOUT,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        if flag == "-h" || flag == "--help" {
            return Err(String::new());
        }
        let value = it.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |what: &str| format!("{flag}: {value:?} is not {what}");
        match flag.as_str() {
            "--listen" => {
                args.listen = value
                    .parse()
                    .map_err(|_| bad("an address like 127.0.0.1:0"))?
            }
            "--port-file" => args.port_file = Some(PathBuf::from(value)),
            "--capacity" => {
                args.sim.capacity = value
                    .parse()
                    .ok()
                    .filter(|c| *c > 0)
                    .ok_or_else(|| bad("a positive count"))?
            }
            "--service-ms" => {
                // The bound `POST /__control/sim` keeps to as well.
                args.sim.service_ms = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms <= resilient_upstream::script::MAX_WAIT_MS)
                    .ok_or_else(|| bad("milliseconds, at most 600000"))?
            }
            "--fail-ratio" => {
                args.sim.fail_ratio = value
                    .parse()
                    .ok()
                    .filter(|r| (0.0..=1.0).contains(r))
                    .ok_or_else(|| bad("a ratio in 0..=1"))?
            }
            "--fail-status" => {
                args.sim.fail_status = value
                    .parse()
                    .ok()
                    .filter(|s| (200..=999).contains(s))
                    .ok_or_else(|| bad("a status"))?
            }
            "--header-timeout-ms" => {
                args.header_read_timeout = value
                    .parse()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| bad("a positive number of milliseconds"))?
            }
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if !args.listen.ip().is_loopback() {
        // The attempts log shows every header, secrets included: never expose it.
        return Err(format!(
            "--listen {}: only loopback addresses are allowed",
            args.listen
        ));
    }
    Ok(args)
}

fn write_port_file(path: &PathBuf, port: u16) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, format!("{port}\n"))?;
    std::fs::rename(&tmp, path)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("resilient-upstream: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let listener = match TcpListener::bind(args.listen).await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("resilient-upstream: cannot listen on {}: {e}", args.listen);
            return ExitCode::from(1);
        }
    };
    let addr = listener.local_addr().expect("bound socket has an address");
    let (mut term, mut int) = match (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) {
        (Ok(t), Ok(i)) => (t, i),
        _ => {
            eprintln!("resilient-upstream: cannot install signal handlers");
            return ExitCode::from(1);
        }
    };
    if let Some(path) = &args.port_file {
        if let Err(e) = write_port_file(path, addr.port()) {
            eprintln!("resilient-upstream: cannot write {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    println!("listening {addr}");
    let app = Arc::new(App::new(args.sim));
    serve_with(listener, app, args.header_read_timeout, async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
    .await;
    if let Some(path) = &args.port_file {
        let _ = std::fs::remove_file(path);
    }
    ExitCode::SUCCESS
}
