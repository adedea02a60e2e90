//! Child processes the lab starts (upstream, redis, php-fpm, nginx), stopped for sure.
//!
//! Every child is a [`Child`] guard: dropping it sends SIGTERM, waits up to 3 s, then SIGKILLs.
//! So an error, a panic or Ctrl-C (main turns SIGINT/SIGTERM into an orderly return) stops them.
//! Children stay in the lab's process group, so `lab/run.sh`, which starts the lab in its own
//! group, can kill the whole group as a last resort (e.g. if the lab itself is SIGKILLed).
//! php-fpm is the exception: it makes itself a session leader (`setsid`), and its workers
//! outlive a master killed alone. So a child that leads its own group is signalled as a group.

use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
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
        let inner = cmd
            .spawn()
            .map_err(|e| format!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
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
        let target = if unsafe { getpgid(pid) } == pid {
            -pid
        } else {
            pid
        };
        unsafe { libc_kill(target, 15) };
        let until = Instant::now() + Duration::from_secs(3);
        while Instant::now() < until {
            if let Ok(Some(_)) = c.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        // SAFETY: as above (the child is not reaped, so its group id is still its own).
        unsafe { libc_kill(target, 9) };
        let _ = c.wait();
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        self.stop();
    }
}

extern "C" {
    #[link_name = "kill"]
    fn libc_kill(pid: i32, sig: i32) -> i32;
    fn getpgid(pid: i32) -> i32;
}

/// A loopback port that was free a moment ago (bind to :0, read, release).
pub fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

/// Waits until something accepts TCP connections on the loopback port.
pub fn wait_for_port(port: u16, timeout: Duration) -> bool {
    let until = Instant::now() + timeout;
    while Instant::now() < until {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(30));
    }
    false
}
