//! A redis-server per test on a free loopback port, and backends over it.
#![allow(dead_code)]

pub mod cluster;

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use resilient_core::{FunnelConfig, Segment};
use resilient_http::{Backend, Guard, OnBackendError, SharedMemory};
use resilient_redis::{Redis, Server, Target};

pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: std::path::PathBuf,
    /// redis-server arguments beyond the defaults (e.g. cluster mode).
    extra: Vec<String>,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        Self::start_with(&[])
    }
    /// A server started with `extra` arguments too. A cluster node gets a bus port of its own,
    /// picked free: by default Redis takes the port + 10000, which may be another socket's (it
    /// lies where outgoing connections take their ports), and the node then exits just after
    /// its port opened. A server that exits while starting (a port taken between the pick and
    /// the bind) is started again on other ports.
    pub fn start_with(extra: &[&str]) -> RedisServer {
        for _ in 0..5 {
            let port = free_port();
            let dir = std::env::temp_dir().join(format!(
                "resilient-redis-test-{}-{port}",
                std::process::id()
            ));
            std::fs::create_dir_all(&dir).unwrap();
            let mut extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
            if extra.iter().any(|a| a == "--cluster-enabled") {
                extra.extend(["--cluster-port".to_owned(), free_port().to_string()]);
            }
            let mut s = RedisServer {
                child: None,
                port,
                dir,
                extra,
            };
            if s.try_start() {
                return s;
            }
        }
        panic!("redis-server did not start on five pairs of ports");
    }
    /// Starts the server again on its port (after [`kill`](Self::kill)).
    pub fn restart(&mut self) {
        assert!(self.try_start(), "redis-server did not start again");
    }
    /// Spawns redis-server and waits until it answers PING; false if it exited first.
    fn try_start(&mut self) -> bool {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--port", &self.port.to_string()])
            .args(["--save", "", "--appendonly", "no", "--dir"])
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server on PATH");
        let pid = child.id();
        self.child = Some(child);
        let until = Instant::now() + Duration::from_secs(5);
        loop {
            match serving_pid(self.port) {
                // Ours, or one that wants a password (only ours is started with one).
                Some(Some(serving)) if serving == pid => return true,
                Some(None) => return true,
                // Another test's server took the port between the pick and the bind: ours
                // cannot bind it and exits.
                Some(Some(other)) => {
                    eprintln!("port {} is redis-server {other}'s", self.port);
                    self.kill();
                    return false;
                }
                None => {}
            }
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                eprintln!("redis-server on port {} exited: {status}", self.port);
                self.child = None;
                return false;
            }
            assert!(Instant::now() < until, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }
    pub fn url(&self, prefix: &str) -> String {
        format!("redis://127.0.0.1:{}/0?prefix={prefix}", self.port)
    }
    /// The URL (key prefix `user:`) of a new ACL user `user` allowed every command but
    /// `ZREM`: Redis runs its scripts and refuses its releases.
    pub fn url_of_a_user_without_zrem(&self, user: &str) -> String {
        let rule = format!(">{user}-pass");
        self.cli(&[
            "ACL", "SETUSER", user, "on", &rule, "~*", "&*", "+@all", "-zrem",
        ]);
        format!(
            "redis://{user}:{user}-pass@127.0.0.1:{}/0?prefix={user}:",
            self.port
        )
    }

    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }
}

/// A loopback port nothing listens on now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The process id of the Redis serving `port` (`INFO server`): `None` when nothing answers (a
/// port that accepts may belong to a server about to exit), `Some(None)` when it wants a
/// password first.
fn serving_pid(port: u16) -> Option<Option<u32>> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n").ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).ok()?;
        if n == 0 {
            return None;
        }
        reply.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&reply);
        if text.starts_with("-NOAUTH") {
            return Some(None);
        }
        if let Some(line) = text.lines().find(|l| l.starts_with("process_id:")) {
            if text.contains("run_id:") {
                return line["process_id:".len()..].trim().parse().ok().map(Some);
            }
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn segment(tag: &str) -> Arc<Segment> {
    let path = std::env::temp_dir().join(format!(
        "resilient-redis-test-{}-{tag}.shm",
        std::process::id()
    ));
    let _ = std::fs::remove_file(&path);
    let segment = Arc::new(Segment::open(&path, 16).unwrap());
    // Mapped, it lives on without its name (nothing here opens it again by path): no file left
    // behind in /tmp by each test.
    let _ = std::fs::remove_file(&path);
    segment
}

pub fn backend(url: &str, mode: OnBackendError, hosts: u32, seg: &str) -> Redis {
    let local: Arc<dyn Backend> = Arc::new(SharedMemory::new(segment(seg)));
    Redis::new(
        Arc::new(Server::new(Target::parse(url).unwrap()).unwrap()),
        mode,
        hosts,
        Some(local),
    )
}

/// Held for the whole of a test that gives back the process's slots (`release_leftovers()`, a
/// request's end): the registry is process-wide, so another test's slots, held at the same
/// time, would be given back and counted too.
pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
    TURN.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Counts a backend's fallbacks (`Redis::with_events`): tells a call Redis decided from one
/// `on_backend_error` let through.
#[derive(Default)]
pub struct Fallbacks(std::sync::atomic::AtomicU32);

impl Fallbacks {
    pub fn count(&self) -> u32 {
        self.0.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl resilient_http::CallEvents for Fallbacks {
    fn backend_fallback(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `name`'s funnel of `limit` slots (no reserve) for a web caller of `b`.
pub fn web_funnel(b: &Redis, name: &str, limit: u32, lease: Duration) -> Arc<dyn Guard> {
    b.funnel(name, FunnelConfig::new(limit, 0, lease).unwrap(), false)
        .unwrap()
}

pub fn now_ms() -> u64 {
    resilient_core::clock::monotonic_ms()
}

/// Keeps the redis-server on `port` busy for `ms` (a Lua loop on a connection of its own: DEBUG
/// SLEEP is disabled by default since Redis 7), and returns once Redis is seen busy (a PING
/// left unanswered for 20 ms). Join the handle to wait for the end of the stall.
pub fn stall(port: u16, ms: u64) -> std::thread::JoinHandle<()> {
    use std::io::{Read, Write};
    let lua = format!(
        "local s=redis.call('TIME') while true do local t=redis.call('TIME') \
         if (t[1]-s[1])*1000000+(t[2]-s[2]) > {} then break end end return 1",
        ms * 1000
    );
    let mut raw = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    raw.write_all(format!("*3\r\n$4\r\nEVAL\r\n${}\r\n{lua}\r\n$1\r\n0\r\n", lua.len()).as_bytes())
        .unwrap();
    let busy = std::thread::spawn(move || {
        let mut reply = [0u8; 16];
        let _ = raw.read(&mut reply);
    });
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let mut probe = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        probe
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        probe.write_all(b"*1\r\n$4\r\nPING\r\n").unwrap();
        let mut reply = [0u8; 16];
        if probe.read(&mut reply).is_err() {
            return busy;
        }
        assert!(Instant::now() < until, "Redis never became busy");
    }
}

/// Asks `f` until it answers `Ok` (Redis usable again after a back-off), at most 5 s; then
/// fails with `what` and the last answer.
pub fn until_ok<T, E: std::fmt::Debug>(what: &str, mut f: impl FnMut() -> Result<T, E>) -> T {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        match f() {
            Ok(v) => return v,
            Err(e) => assert!(Instant::now() < until, "{what}: {e:?} for 5 s"),
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

static REPORTS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Sends this test process's reports (`resilient_redis::report_to`) to [`reports`].
pub fn collect_reports() {
    fn collect(message: &str) {
        REPORTS.lock().unwrap().push(message.to_owned());
    }
    resilient_redis::report_to(collect);
}

/// The reports collected so far.
pub fn reports() -> Vec<String> {
    REPORTS.lock().unwrap().clone()
}
