//! The shared-memory segment: one file per user under `/dev/shm`, mapped `MAP_SHARED` by
//! every process that uses it.
//!
//! Creation is race-free: the creator opens with `O_CREAT|O_EXCL|O_NOFOLLOW`, sizes the
//! file, writes the header and stores the magic last. Anyone else opens the existing file
//! and refuses it unless it is a regular file owned by this user, not writable by group or
//! others, of the expected size, with our magic and layout version. A bad file is never
//! mapped blindly: the error names the path and the problem.

use crate::layout::{Entry, Header, ENTRY_SIZE, HEADER_SIZE, LAYOUT_VERSION, MAGIC};
use crate::{table, Error};
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The largest table we create: 65536 names.
pub const MAX_SLOTS: u32 = 65_536;

/// How long an opener waits for a concurrent creator to finish writing the header.
const INIT_WAIT: Duration = Duration::from_millis(1000);

/// A mapped segment. Cheap to share (`Arc<Segment>`); unmapped on drop.
pub struct Segment {
    base: *mut u8,
    len: usize,
    slots: u32,
    path: PathBuf,
}

// SAFETY: the mapping is only accessed through atomics; the pointer itself is immutable.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

impl Segment {
    /// Opens the segment at `path`, creating it with `slots` entries if it does not exist.
    /// An existing file keeps its own slot count.
    pub fn open(path: &Path, slots: u32) -> Result<Segment, Error> {
        if slots == 0 || slots > MAX_SLOTS {
            return Err(Error::invalid_argument(
                "resilient.shm_slots",
                format!("must be between 1 and {MAX_SLOTS}, got {slots}"),
            ));
        }
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::segment(path, "the path contains a NUL byte"))?;
        // SAFETY: plain syscalls on a valid C string; every result is checked.
        let fd = unsafe {
            libc::open(
                cpath.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd >= 0 {
            let fd = Fd(fd);
            return Self::create(path, fd, slots).inspect_err(|_| {
                // SAFETY: removing the half-made file we created ourselves.
                unsafe { libc::unlink(cpath.as_ptr()) };
            });
        }
        let err = std::io::Error::last_os_error();
        if err.raw_os_error() != Some(libc::EEXIST) {
            return Err(Error::segment(path, format!("cannot create: {err}")));
        }
        // SAFETY: as above.
        let fd = unsafe {
            libc::open(
                cpath.as_ptr(),
                libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            let err = std::io::Error::last_os_error();
            if err.raw_os_error() == Some(libc::ELOOP) {
                return Err(Error::segment(
                    path,
                    "is a symbolic link; refusing to follow it",
                ));
            }
            return Err(Error::segment(path, format!("cannot open: {err}")));
        }
        Self::attach(path, Fd(fd))
    }

    fn create(path: &Path, fd: Fd, slots: u32) -> Result<Segment, Error> {
        let len = crate::layout::segment_size(slots);
        // SAFETY: fd is ours; the umask cannot widen 0600 but we make it exact anyway.
        unsafe {
            libc::fchmod(fd.0, 0o600);
            if libc::ftruncate(fd.0, len as libc::off_t) != 0 {
                return Err(Error::segment(
                    path,
                    format!("cannot size it: {}", std::io::Error::last_os_error()),
                ));
            }
        }
        let seg = Self::map(path, &fd, len, slots)?;
        let h = seg.header();
        h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        h.slots.store(slots, Ordering::Relaxed);
        h.entry_size.store(ENTRY_SIZE as u32, Ordering::Relaxed);
        h.total_size.store(len as u64, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
        Ok(seg)
    }

    fn attach(path: &Path, fd: Fd) -> Result<Segment, Error> {
        let deadline = Instant::now() + INIT_WAIT;
        loop {
            let st = fd.stat(path)?;
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(Error::segment(path, "is not a regular file"));
            }
            // SAFETY: geteuid cannot fail.
            let uid = unsafe { libc::geteuid() };
            if st.st_uid != uid {
                return Err(Error::segment(path, format!("is owned by uid {}, not by this process's uid {uid}; refusing a foreign file", st.st_uid)));
            }
            if st.st_mode & 0o022 != 0 {
                return Err(Error::segment(
                    path,
                    format!(
                        "is writable by group or others (mode {:o}); refusing it",
                        st.st_mode & 0o777
                    ),
                ));
            }
            let size = st.st_size as usize;
            if size >= HEADER_SIZE {
                let seg = Self::map(path, &fd, size, 0)?;
                let h = seg.header();
                let magic = h.magic.load(Ordering::Acquire);
                if magic == MAGIC {
                    return seg.validated(size);
                }
                if magic != 0 {
                    return Err(Error::segment(
                        path,
                        "is not a resilient segment (bad magic); remove it after stopping PHP",
                    ));
                }
            }
            if Instant::now() >= deadline {
                return Err(Error::segment(
                    path,
                    "is not initialised (no header after 1 s): corrupt, or its creator died; remove it after stopping PHP",
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn validated(mut self, size: usize) -> Result<Segment, Error> {
        let h = self.header();
        let version = h.version.load(Ordering::Relaxed);
        if version != LAYOUT_VERSION {
            return Err(Error::segment(
                &self.path,
                format!("has layout version {version}, this extension uses {LAYOUT_VERSION}; stop PHP and remove the file"),
            ));
        }
        let slots = h.slots.load(Ordering::Relaxed);
        let entry_size = h.entry_size.load(Ordering::Relaxed) as usize;
        let total = h.total_size.load(Ordering::Relaxed) as usize;
        if slots == 0
            || slots > MAX_SLOTS
            || entry_size != ENTRY_SIZE
            || total != size
            || total != crate::layout::segment_size(slots)
        {
            return Err(Error::segment(
                &self.path,
                format!("is corrupt (slots {slots}, entry size {entry_size}, recorded size {total}, file size {size}); remove it after stopping PHP"),
            ));
        }
        self.slots = slots;
        Ok(self)
    }

    fn map(path: &Path, fd: &Fd, len: usize, slots: u32) -> Result<Segment, Error> {
        // SAFETY: mapping a file we hold open, shared, read-write; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.0,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::segment(
                path,
                format!("cannot map it: {}", std::io::Error::last_os_error()),
            ));
        }
        Ok(Segment {
            base: base as *mut u8,
            len,
            slots,
            path: path.to_path_buf(),
        })
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_SIZE long and page-aligned.
        unsafe { &*(self.base as *const Header) }
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        // SAFETY: validated: the file holds exactly `slots` entries after the header, and
        // every field of Entry is an atomic, valid for any bit pattern (zeroed on creation).
        unsafe {
            std::slice::from_raw_parts(
                self.base.add(HEADER_SIZE) as *const Entry,
                self.slots as usize,
            )
        }
    }

    pub(crate) fn entry(&self, idx: usize) -> &Entry {
        &self.entries()[idx]
    }

    /// The index of `name`'s entry, claiming a free one the first time a name is used.
    pub fn entry_index(&self, name: &str) -> Result<usize, Error> {
        crate::validate::name("name", name)?;
        self.entry_index_unchecked(name)
    }

    /// As [`Segment::entry_index`] for keys the core composes itself.
    pub(crate) fn entry_index_unchecked(&self, key: &str) -> Result<usize, Error> {
        table::find_or_claim(self.entries(), key)
            .ok_or_else(|| Error::table_full(&self.path, self.slots))
    }

    /// Names in use, with their entry index (for metrics).
    pub fn names(&self) -> Vec<(usize, String)> {
        self.entries()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.hash.load(Ordering::Acquire) != 0)
            .map(|(i, e)| (i, table::read_name(e)))
            .collect()
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Releases a lease by id. Idempotent: false when it was already released or reclaimed,
    /// and when it belongs to another process (a `pcntl_fork` child must never free its
    /// parent's slot, whatever object or guard it inherited).
    pub fn release(&self, id: crate::LeaseId) -> bool {
        if id.holder_pid() != crate::liveness::current_pid() {
            return false;
        }
        crate::funnel::release_slot(self.entry(id.entry), id)
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what `map` mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// An owned file descriptor, closed on drop (the mapping stays valid after close).
struct Fd(libc::c_int);

impl Fd {
    fn stat(&self, path: &Path) -> Result<libc::stat, Error> {
        // SAFETY: zeroed stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        if unsafe { libc::fstat(self.0, &mut st) } != 0 {
            return Err(Error::segment(
                path,
                format!("cannot stat: {}", std::io::Error::last_os_error()),
            ));
        }
        Ok(st)
    }
}

impl Drop for Fd {
    fn drop(&mut self) {
        // SAFETY: closing our own descriptor once.
        unsafe { libc::close(self.0) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    pub(crate) fn temp_path(tag: &str) -> PathBuf {
        let p = std::env::temp_dir().join(format!(
            "resilient-core-{tag}-{}-{:?}.shm",
            std::process::id(),
            std::thread::current().id()
        ));
        let _ = std::fs::remove_file(&p);
        p
    }

    #[test]
    fn creates_then_attaches_with_the_file_slot_count() {
        let p = temp_path("create");
        let a = Segment::open(&p, 8).unwrap();
        let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let b = Segment::open(&p, 999).unwrap();
        assert_eq!(b.slots(), 8);
        let i = a.entry_index("sap").unwrap();
        assert_eq!(b.entry_index("sap").unwrap(), i);
        assert_eq!(b.names(), vec![(i, "sap".to_string())]);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn refuses_garbage_world_writable_and_wrong_size() {
        let p = temp_path("garbage");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .mode_0600()
            .open(&p)
            .unwrap();
        f.write_all(&[0xAB; 4096]).unwrap();
        let e = Segment::open(&p, 8).err().unwrap();
        assert!(e.is_segment() && e.to_string().contains("bad magic"), "{e}");

        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o666)).unwrap();
        let e = Segment::open(&p, 8).err().unwrap();
        assert!(e.to_string().contains("writable by group or others"), "{e}");
        std::fs::remove_file(&p).unwrap();

        // A valid segment truncated: recorded size no longer matches.
        drop(Segment::open(&p, 8).unwrap());
        let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.set_len(HEADER_SIZE as u64 + 10).unwrap();
        let e = Segment::open(&p, 8).err().unwrap();
        assert!(e.to_string().contains("corrupt"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn refuses_wrong_version_and_symlink_and_empty() {
        let p = temp_path("version");
        drop(Segment::open(&p, 4).unwrap());
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[8..12].copy_from_slice(&99u32.to_le_bytes());
        std::fs::write(&p, &bytes).unwrap();
        let e = Segment::open(&p, 4).err().unwrap();
        assert!(e.to_string().contains("layout version 99"), "{e}");

        let link = temp_path("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = Segment::open(&link, 4).err().unwrap();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        std::fs::remove_file(&link).unwrap();
        std::fs::remove_file(&p).unwrap();

        std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .mode_0600()
            .open(&p)
            .unwrap();
        let e = Segment::open(&p, 4).err().unwrap();
        assert!(e.to_string().contains("not initialised"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn refuses_a_file_owned_by_another_user() {
        if unsafe { libc::geteuid() } != 0 {
            return; // only root can make a file owned by someone else
        }
        let p = temp_path("foreign");
        drop(Segment::open(&p, 4).unwrap());
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        let e = Segment::open(&p, 4).err().unwrap();
        assert!(
            e.is_segment() && e.to_string().contains("owned by uid 65534"),
            "{e}"
        );
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn table_full_is_a_clear_error() {
        let p = temp_path("full");
        let s = Segment::open(&p, 3).unwrap();
        for n in ["a", "b", "c"] {
            s.entry_index(n).unwrap();
        }
        assert!(s.entry_index("a").is_ok());
        let e = s.entry_index("d").unwrap_err();
        assert!(
            e.is_table_full() && e.to_string().contains("all 3 names"),
            "{e}"
        );
        let e = s.entry_index(&"x".repeat(65)).unwrap_err();
        assert!(e.is_invalid_argument());
        std::fs::remove_file(&p).unwrap();
    }

    trait Mode0600 {
        fn mode_0600(&mut self) -> &mut Self;
    }
    impl Mode0600 for std::fs::OpenOptions {
        fn mode_0600(&mut self) -> &mut Self {
            std::os::unix::fs::OpenOptionsExt::mode(self, 0o600)
        }
    }
}
