//! Child processes the lab starts (upstream, redis, php-fpm, nginx), stopped for sure.
//!
//! Every child is a [`Child`] guard: dropping it sends SIGTERM, waits up to 3 s, then SIGKILLs.
//! So an error, a panic or Ctrl-C (main turns SIGINT/SIGTERM into an orderly return) stops them.
//! php-fpm makes itself a session leader (`setsid`), and its workers outlive a master killed
//! alone, so a child that leads its own group is signalled as a group.
//!
//! When the lab is SIGKILLed no guard runs, and no process-group kill reaches php-fpm's own
//! session: so every child also asks the kernel for SIGTERM when the lab dies
//! (`PR_SET_PDEATHSIG`), which stops php-fpm's master and, through it, its workers.

use std::fs::File;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{mpsc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// A running child process that is stopped when dropped.
pub struct Child {
    name: String,
    inner: Option<std::process::Child>,
}

impl Child {
    /// Starts `cmd` with stdout/stderr appended to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: &Path) -> Result<Child, String> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        cmd.stdin(Stdio::null()).stdout(out).stderr(err);
        let program = cmd.get_program().to_owned();
        let inner =
            spawn_tied(cmd).map_err(|e| format!("cannot start {name} ({program:?}): {e}"))?;
        Ok(Child {
            name: name.to_string(),
            inner: Some(inner),
        })
    }

    /// `Err` with the exit status if the child has already exited.
    pub fn check_alive(&mut self) -> Result<(), String> {
        if let Some(c) = self.inner.as_mut() {
            if let Ok(Some(status)) = c.try_wait() {
                return Err(format!("{} exited early: {status}", self.name));
            }
        }
        Ok(())
    }

    /// SIGTERM, wait up to 3 s, then SIGKILL; always reaps. A child leading its own process
    /// group (php-fpm) gets both signals as a group, so no worker of it is left behind.
    pub fn stop(&mut self) {
        let Some(mut c) = self.inner.take() else {
            return;
        };
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        let pid = c.id() as i32;
        // SAFETY: getpgid(2) and kill(2) on our own child's pid, which we have not reaped yet.
        let target = if unsafe { libc::getpgid(pid) } == pid {
            -pid
        } else {
            pid
        };
        unsafe { libc::kill(target, libc::SIGTERM) };
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above (the child is not reaped, so its group id is still its own).
        unsafe { libc::kill(target, libc::SIGKILL) };
        let _ = c.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A spawn request for the spawner thread, and where its answer goes.
type SpawnJob = (Command, mpsc::Sender<io::Result<std::process::Child>>);

/// Starts `cmd` so that it gets SIGTERM when the lab dies. The kernel sends that signal when
/// the *thread* that forked the child ends, not the process: so every child is forked by one
/// spawner thread that lives as long as the lab (a tokio blocking thread ends after 10 s idle).
fn spawn_tied(mut cmd: Command) -> io::Result<std::process::Child> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let lab = std::process::id() as i32;
    // SAFETY: prctl(2) and getppid(2) are async-signal-safe system calls, and the error needs
    // no allocation: fine between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                return Err(io::Error::last_os_error());
            }
            // The lab died before the request took effect: nobody would stop this child.
            if libc::getppid() != lab {
                return Err(io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let spawner = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("lab-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("cannot start the spawner thread");
        Mutex::new(tx)
    });
    let (reply, answer) = mpsc::channel();
    spawner
        .lock()
        .map_err(|_| io::Error::other("spawner lock poisoned"))?
        .send((cmd, reply))
        .map_err(|_| io::Error::other("the spawner thread is gone"))?;
    answer
        .recv()
        .map_err(|_| io::Error::other("the spawner thread is gone"))?
}

/// A loopback port that was free a moment ago (bind to :0, read, release).
pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// How long a service started for a run gets to listen on its port.
const LISTEN_WAIT: Duration = Duration::from_secs(10);

/// Waits until something accepts TCP connections on the loopback port `child` was told to
/// listen on, at most [`LISTEN_WAIT`]; an error as soon as `child` exits (a port taken, a bad
/// configuration: said at once rather than after the whole wait). Errors name the child and
/// `log`, where it says why.
pub fn wait_listening(child: &mut Child, port: u16, log: &str) -> Result<(), String> {
    let until = Instant::now() + LISTEN_WAIT;
    while Instant::now() < until {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Ok(());
        }
        child
            .check_alive()
            .map_err(|e| format!("{e} (see {log})"))?;
        std::thread::sleep(Duration::from_millis(30));
    }
    Err(format!(
        "{} did not listen within {} s (see {log})",
        child.name,
        LISTEN_WAIT.as_secs()
    ))
}
