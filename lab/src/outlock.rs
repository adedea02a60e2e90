//! One lab run at a time per output directory: `<out>/.lab.lock`, locked (flock) for the whole
//! run. Two runs on one directory would overwrite each other's report and plots; the kernel
//! releases the lock however the lab ends, so a killed run never leaves it held.

use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;

/// The lock, held until dropped.
pub struct OutLock {
    _file: File,
}

impl OutLock {
    /// Locks `out` (created if missing), or says which run holds it.
    pub fn take(out: &Path) -> Result<OutLock, String> {
        let path = out.join(".lab.lock");
        let err = |e: std::io::Error| format!("{}: {e}", path.display());
        std::fs::create_dir_all(out)
            .map_err(|e| format!("cannot create {}: {e}", out.display()))?;
        let mut f = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(err)?;
        // SAFETY: flock(2) on a descriptor this function owns.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = f.read_to_string(&mut holder);
            return Err(format!(
                "another lab run (pid {}) is using {}: wait for it to end, or give this one another --out",
                holder.trim(),
                out.display()
            ));
        }
        f.set_len(0).map_err(err)?;
        f.rewind().map_err(err)?;
        writeln!(f, "{}", std::process::id()).map_err(err)?;
        Ok(OutLock { _file: f })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_lock_on_the_same_directory_is_refused_until_the_first_is_dropped() {
        let out = std::env::temp_dir().join(format!("resilient-lab-lock-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let first = OutLock::take(&out).unwrap();
        let e = OutLock::take(&out).err().expect("a second lock");
        assert!(
            e.contains("another lab run") && e.contains(&std::process::id().to_string()),
            "{e}"
        );
        drop(first);
        assert!(OutLock::take(&out).is_ok());
        let _ = std::fs::remove_dir_all(&out);
    }
}
