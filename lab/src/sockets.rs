//! The run's unix sockets (php-fpm's status listeners, which nginx reaches) live in a short
//! directory of their own, `/tmp/resilient-lab-<pid>` (0700), not in the run's folders: a
//! socket's path holds at most 107 bytes, and `<checkout>/lab/out/run-…/<scenario>/<variant>/`
//! leaves no room for one under a long checkout path. Removed when the lab ends; lab/run.sh
//! removes it too, should the lab be killed.

use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// The longest path a unix socket may have (`sun_path` holds 108 bytes with its NUL).
pub const MAX_PATH: usize = 107;

/// This lab's socket directory.
pub fn dir() -> PathBuf {
    PathBuf::from(format!("/tmp/resilient-lab-{}", std::process::id()))
}

/// The socket `name` in [`dir`], refused when its path is too long for a socket.
pub fn path(name: &str) -> Result<PathBuf, String> {
    let p = dir().join(name);
    if p.as_os_str().len() > MAX_PATH {
        return Err(format!(
            "{}: longer than the {MAX_PATH} bytes a unix socket's path may have",
            p.display()
        ));
    }
    Ok(p)
}

/// The socket directory while the lab runs: created empty, removed on drop.
pub struct SocketDir(PathBuf);

impl SocketDir {
    pub fn create() -> Result<SocketDir, String> {
        let d = dir();
        // Left by an earlier lab of the same pid that was killed.
        let _ = std::fs::remove_dir_all(&d);
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&d)
            .map_err(|e| format!("cannot create {} for the run's sockets: {e}", d.display()))?;
        Ok(SocketDir(d))
    }
}

impl Drop for SocketDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// php-fpm's status socket of a scenario's variant, on host `a` or `b`.
pub fn fpm_status(scenario: &str, variant: &str, host: char) -> Result<PathBuf, String> {
    path(&format!("{scenario}-{variant}-{host}-fpm-status.sock"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::VARIANTS;
    use crate::scenario::{ALL, EXTRA};
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn every_status_socket_fits_whatever_the_checkout_path() {
        // The longest pid Linux gives (pid_max 4194304) adds a digit at most.
        let spare = "4194304".len() - std::process::id().to_string().len();
        for sc in ALL.iter().chain(EXTRA.iter()) {
            for v in VARIANTS {
                for host in ['a', 'b'] {
                    let p = fpm_status(sc.name(), v, host).unwrap();
                    assert!(p.as_os_str().len() + spare <= MAX_PATH, "{}", p.display());
                }
            }
        }
        let e = path(&"x".repeat(100)).unwrap_err();
        assert!(e.contains("107 bytes"), "{e}");
    }

    #[test]
    fn the_directory_is_private_and_removed_at_the_end() {
        let d = SocketDir::create().unwrap();
        let meta = std::fs::metadata(dir()).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        std::fs::write(dir().join("left.sock"), "").unwrap();
        drop(d);
        assert!(!dir().exists());
    }
}
