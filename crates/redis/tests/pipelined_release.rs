//! A release, a budget's record of an original or a breaker's record of a success (each sent
//! without waiting for its reply) costs no round trip of its own: the next command is written before its reply is read.
//! Replayed against a server that answers such a command only once the command after it has
//! arrived: a client that read the reply first would wait for it until its timeout, and the
//! command would fail.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use resilient_core::{BreakerConfig, BudgetConfig, Transition};
use resilient_http::{Backend, OnBackendError};
use resilient_redis::{Server, Target};

mod common;

/// Reads one command (a RESP array of bulk strings); None at the end of the stream.
fn read_command(r: &mut BufReader<TcpStream>) -> Option<Vec<String>> {
    let mut line = String::new();
    if r.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let n: usize = line.trim_end().strip_prefix('*')?.parse().ok()?;
    let mut args = Vec::with_capacity(n);
    for _ in 0..n {
        line.clear();
        r.read_line(&mut line).ok()?;
        let len: usize = line.trim_end().strip_prefix('$')?.parse().ok()?;
        let mut buf = vec![0; len + 2];
        r.read_exact(&mut buf).ok()?;
        buf.truncate(len);
        args.push(String::from_utf8(buf).ok()?);
    }
    Some(args)
}

/// Serves one connection: `+OK` to everything (the client's hello included), `+PONG` to
/// PING, a script's hash to SCRIPT LOAD, `:1` to EVALSHA; a ZREM's `:1`, and an EVALSHA's whose
/// first argument is `o` (a budget's record of an original) or `record` with a success (a
/// breaker's), only after the next command has arrived. Returns the commands seen.
fn withholding_server(listener: TcpListener) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut w = stream.try_clone().unwrap();
        let mut r = BufReader::new(stream);
        let mut seen = Vec::new();
        let mut withheld = 0;
        while let Some(cmd) = read_command(&mut r) {
            let name = cmd[0].to_ascii_uppercase();
            seen.push(name.clone());
            let op = |i: usize, text: &str| cmd.get(i).is_some_and(|a| a == text);
            let record = name == "EVALSHA" && (op(4, "o") || (op(4, "record") && op(6, "0")));
            if name == "ZREM" || record {
                withheld += 1;
                continue;
            }
            for _ in 0..std::mem::take(&mut withheld) {
                w.write_all(b":1\r\n").unwrap();
            }
            let reply = match name.as_str() {
                "PING" => "+PONG\r\n".to_owned(),
                "EVALSHA" => ":1\r\n".to_owned(),
                "SCRIPT" => {
                    let hash = redis::Script::new(&cmd[2]).get_hash().to_owned();
                    format!("${}\r\n{hash}\r\n", hash.len())
                }
                _ => "+OK\r\n".to_owned(),
            };
            w.write_all(reply.as_bytes()).unwrap();
        }
        seen
    })
}

/// The commands `seen` but the client's hello.
fn ours(seen: &[String]) -> Vec<&str> {
    seen.iter()
        .map(String::as_str)
        .filter(|c| *c != "CLIENT")
        .collect()
}

#[test]
fn a_release_is_answered_with_the_next_command_not_before_it() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = withholding_server(listener);
    let server =
        Server::new(Target::parse(&format!("redis://127.0.0.1:{port}/0?timeout=2")).unwrap())
            .unwrap();

    server.send(redis::cmd("ZREM").arg("k").arg("a")).unwrap();
    server.send(redis::cmd("ZREM").arg("k").arg("b")).unwrap();
    let started = Instant::now();
    let pong: String = server
        .run(|c| redis::cmd("PING").query(c))
        .expect("PING answered after the two releases' replies");
    assert_eq!(pong, "PONG");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "waited {:?}: the releases' replies were awaited before PING was sent",
        started.elapsed()
    );
    // In step afterwards: the next command gets its own reply.
    let again: String = server.run(|c| redis::cmd("PING").query(c)).unwrap();
    assert_eq!(again, "PONG");

    drop(server);
    let seen = served.join().unwrap();
    assert_eq!(ours(&seen), ["ZREM", "ZREM", "PING", "PING"]);
}

#[test]
fn a_budget_records_an_original_without_waiting_for_its_reply() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = withholding_server(listener);
    let url = format!("redis://127.0.0.1:{port}/0?timeout=2");
    let redis = common::backend(&url, OnBackendError::Closed, 1, "pipelined-budget");
    let config = BudgetConfig::new(0.1, 5, Duration::from_secs(10)).unwrap();
    let budget = redis.budget("sap", config).unwrap();

    let started = Instant::now();
    budget.record_original(0);
    budget.record_original(0);
    assert!(
        budget.try_consume(0),
        "the decision is answered after the records' replies"
    );
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "waited {:?}: a record's reply was awaited before the next command was sent",
        started.elapsed()
    );
    budget.record_original(0);
    assert!(budget.try_consume(0));

    drop((budget, redis));
    let seen = served.join().unwrap();
    // The script loaded once for the connection; every command on that one connection.
    assert_eq!(
        ours(&seen),
        ["SCRIPT", "EVALSHA", "EVALSHA", "EVALSHA", "EVALSHA", "EVALSHA"]
    );
}

#[test]
fn a_breaker_records_a_success_without_waiting_for_its_reply() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let served = withholding_server(listener);
    let url = format!("redis://127.0.0.1:{port}/0?timeout=2");
    let redis = common::backend(&url, OnBackendError::Closed, 1, "pipelined-breaker");
    let ms = Duration::from_millis;
    let config = BreakerConfig::new(0.5, 4, ms(10_000), ms(100), ms(1000)).unwrap();
    let breaker = redis.breaker("sap", config).unwrap();

    let started = Instant::now();
    assert_eq!(breaker.record(false, 0, 0, 0), None);
    assert_eq!(breaker.record(false, 0, 0, 0), None);
    // A failure waits for its answer (it may open the breaker): here, "opened".
    assert_eq!(breaker.record(true, 0, 0, 0), Some(Transition::Opened));
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "waited {:?}: a success's record was awaited before the next command was sent",
        started.elapsed()
    );

    drop((breaker, redis));
    let seen = served.join().unwrap();
    assert_eq!(ours(&seen), ["SCRIPT", "EVALSHA", "EVALSHA", "EVALSHA"]);
}
