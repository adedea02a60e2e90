//! Which host a segment's state belongs to, as far as its meaning depends on it.
//!
//! - The pid namespace: a slot's holder is recognised by its pid and a dead holder by
//!   `kill(pid, 0)`, so a process in another pid namespace (a container sharing `/dev/shm`
//!   through `--ipc=host` or a volume) would see live holders as dead and free their slots.
//!   Processes that share a segment must share a pid namespace; a file created in another one
//!   is refused while a process there maps it (the degraded mode then applies), and taken over
//!   once none does (`segment.rs`). (The kernel may give a namespace's number again; a file
//!   nobody maps forgets its processes' pids anyway.)
//! - The boot: leases expire on `CLOCK_MONOTONIC`, which starts again at zero after a reboot.
//!   A segment on persistent storage that outlived a reboot holds meaningless times and pids,
//!   and nobody can still be using it: it is initialised again.
//!
//! Both are recorded in the header by the creator. Either is 0 where it cannot be read, and
//! 0 matches anything.

use std::sync::OnceLock;

/// The inode of `/proc/self/ns/pid`, which identifies the pid namespace.
pub(crate) fn pid_namespace() -> u64 {
    static NS: OnceLock<u64> = OnceLock::new();
    *NS.get_or_init(|| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata("/proc/self/ns/pid").map_or(0, |m| m.ino())
    })
}

/// A 64-bit digest of `/proc/sys/kernel/random/boot_id` (a UUID that changes every boot).
pub(crate) fn boot_id() -> u64 {
    static BOOT: OnceLock<u64> = OnceLock::new();
    *BOOT.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map_or(0, |id| crate::table::name_hash(id.trim()))
    })
}

/// Both values match (0, unknown, matches anything).
pub(crate) fn same(recorded: u64, ours: u64) -> bool {
    recorded == 0 || ours == 0 || recorded == ours
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_hosts_identity() {
        assert_ne!(pid_namespace(), 0, "/proc/self/ns/pid is readable on Linux");
        assert_ne!(boot_id(), 0);
        assert!(same(0, 5) && same(5, 0) && same(5, 5) && !same(5, 6));
    }
}
