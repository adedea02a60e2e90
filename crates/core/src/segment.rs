//! The shared-memory segment: one file per user (by default under `/dev/shm`), mapped
//! `MAP_SHARED` by every process that uses it.
//!
//! Creation and recovery happen under an exclusive `flock` on the file: the initialiser
//! sizes the file, reserves its pages (`posix_fallocate`: a full tmpfs is an error at
//! creation, never a SIGBUS on first touch), writes the header and stores the magic last.
//! A file without a header (its creator died, e.g. killed between `open` and the magic) is
//! re-initialised by the next opener of the same user under the same lock; the lock dies
//! with its holder, so nobody waits for a dead creator.
//!
//! Anyone else reads the header with `pread` (never through a mapping, so a file shrinking
//! meanwhile cannot fault) and refuses the file unless it is a regular file owned by this
//! user, with no permission bits for group or others, of the expected size, with our magic
//! and layout version. The error names the path and the problem.
//!
//! Every process that maps the file holds a read lock on its first byte for as long as it does
//! (an open file description lock: the kernel's, whatever the pid namespace, gone with the last
//! descriptor), so an opener can tell whether anyone else maps it. A file nobody maps holds
//! nothing of any live process: its opener forgets the funnel slots, the in-flight gauges and
//! a learned limit's unfinished close that processes now gone left, which their pids can no
//! longer tell (a pid the kernel gave to another process looks alive; a container restarted
//! in a new pid namespace may even get its predecessor's namespace number back), and keeps the
//! rest (budgets, breakers, counters, learned limits). A file made in another pid namespace is
//! refused while a process there maps it (holders are told apart by pid, and a pid means
//! another process in each namespace); once nobody does (a container restarted with its
//! `/dev/shm` kept, as a Kubernetes pod's is), it is taken over so. The check and the
//! forgetting happen under the exclusive `flock`, and an opener takes its read lock under a
//! shared one, so nobody maps the file in between.
//!
//! What cannot be prevented: a process of the same user (or root) truncating the file
//! while it is mapped makes the next access through the old mapping fault (SIGBUS).
//! [`Segment::still_valid`] lets the binding notice a shrunk or replaced file between
//! requests; an access in the middle of a call cannot be protected without a signal
//! handler, which an extension must not install.
//!
//! [`Segment::local`] builds the same layout over private anonymous memory: the degraded
//! mode, when the shared file cannot be used.

use crate::layout::{Entry, Header, ENTRY_SIZE, HEADER_SIZE, LAYOUT_VERSION, MAGIC};
use crate::{table, Error};
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The largest table we create: 65536 names.
pub const MAX_SLOTS: u32 = 65_536;

/// How long an opener waits for the lock of a concurrent initialiser (initialising the
/// largest table takes milliseconds; the lock of a dead process is released by the kernel).
const LOCK_WAIT: Duration = Duration::from_millis(2000);

/// How often `open` starts over when the file it opened was removed under it.
const OPEN_TRIES: usize = 5;

/// A mapped segment. Cheap to share (`Arc<Segment>`); unmapped on drop.
pub struct Segment {
    base: *mut u8,
    len: usize,
    slots: u32,
    path: PathBuf,
    /// The open file (kept for [`Segment::still_valid`]); `None` for a process-local one.
    file: Option<OwnedFd>,
}

// SAFETY: the mapping is only accessed through atomics; the pointer itself is immutable.
unsafe impl Send for Segment {}
unsafe impl Sync for Segment {}

/// What `open` found after taking the lock of a file.
enum Locked {
    Ready(Segment),
    /// The file was removed while we waited: start over.
    Gone,
    /// Nobody else maps the file: what processes left in it is to be forgotten, under the
    /// exclusive lock ([`Segment::lock_and_init`]).
    Unused(OwnedFd),
}

fn os_err() -> std::io::Error {
    std::io::Error::last_os_error()
}

fn check_slots(slots: u32) -> Result<(), Error> {
    if slots == 0 || slots > MAX_SLOTS {
        return Err(Error::invalid_argument(
            "resilient.shm_slots",
            format!("must be an integer between 1 and {MAX_SLOTS}, got {slots}"),
        ));
    }
    Ok(())
}

impl Segment {
    /// Opens the segment at `path`, creating it with `slots` entries if it does not exist
    /// (or re-initialising it if its creator died before writing the header). An existing
    /// file keeps its own slot count.
    pub fn open(path: &Path, slots: u32) -> Result<Segment, Error> {
        Self::open_waiting(path, slots, LOCK_WAIT)
    }

    /// As [`Segment::open`], but fails at once instead of waiting for a concurrent
    /// initialiser's lock: for a process that already has a fallback and only checks, now and
    /// then, whether the file has become usable (a call must never wait for that).
    pub fn try_open(path: &Path, slots: u32) -> Result<Segment, Error> {
        Self::open_waiting(path, slots, Duration::ZERO)
    }

    fn open_waiting(path: &Path, slots: u32, lock_wait: Duration) -> Result<Segment, Error> {
        check_slots(slots)?;
        let cpath = CString::new(path.as_os_str().as_bytes())
            .map_err(|_| Error::segment(path, "the path contains a NUL byte"))?;
        for _ in 0..OPEN_TRIES {
            // SAFETY: plain syscall on a valid C string; the result is checked.
            let fd = unsafe {
                libc::open(
                    cpath.as_ptr(),
                    libc::O_RDWR
                        | libc::O_CREAT
                        | libc::O_EXCL
                        | libc::O_NOFOLLOW
                        | libc::O_CLOEXEC,
                    0o600,
                )
            };
            if fd >= 0 {
                // SAFETY: a fresh descriptor we own.
                let fd = unsafe { OwnedFd::from_raw_fd(fd) };
                // SAFETY: our own new file; the umask may only have narrowed 0600.
                unsafe { libc::fchmod(fd.as_raw_fd(), 0o600) };
                match Self::lock_and_init(path, &cpath, fd, slots, lock_wait)? {
                    Locked::Ready(seg) => return Ok(seg),
                    _ => continue,
                }
            }
            let err = os_err();
            if err.raw_os_error() != Some(libc::EEXIST) {
                return Err(Error::segment(path, format!("cannot create: {err}")));
            }
            // SAFETY: as above. O_NONBLOCK: the type is checked only once it is open, and
            // opening a device (a terminal line) could otherwise wait; a regular file ignores it.
            let fd = unsafe {
                libc::open(
                    cpath.as_ptr(),
                    libc::O_RDWR | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK,
                )
            };
            if fd < 0 {
                let err = os_err();
                match err.raw_os_error() {
                    Some(libc::ENOENT) => continue, // removed between our two opens
                    Some(libc::ELOOP) => {
                        return Err(Error::segment(
                            path,
                            "is a symbolic link; refusing to follow it",
                        ))
                    }
                    _ => return Err(Error::segment(path, open_failure(&cpath, &err))),
                }
            }
            // SAFETY: a fresh descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            check_file(path, &fd)?;
            let header = read_header(path, &fd)?;
            if header.magic == MAGIC
                && !header.made_before_this_boot()
                && !header.made_in_another_pid_namespace()
            {
                let fd = match Self::attach_shared(path, fd, lock_wait)? {
                    Locked::Ready(seg) => return Ok(seg),
                    Locked::Gone => continue,
                    Locked::Unused(fd) => fd,
                };
                match Self::lock_and_init(path, &cpath, fd, slots, lock_wait)? {
                    Locked::Ready(seg) => return Ok(seg),
                    _ => continue,
                }
            }
            if header.magic != 0 && header.magic != MAGIC {
                return Err(Error::segment(
                    path,
                    "is not a resilient segment (bad magic); remove it after stopping PHP",
                ));
            }
            // No header yet (or one from an earlier boot or another pid namespace): its creator
            // is still at work (it holds the lock), or died, or nobody uses it any more.
            match Self::lock_and_init(path, &cpath, fd, slots, lock_wait)? {
                Locked::Ready(seg) => return Ok(seg),
                _ => continue,
            }
        }
        Err(Error::segment(
            path,
            "keeps being removed while it is opened; is another program deleting it?",
        ))
    }

    /// Under the shared lock (an initialiser holds the exclusive one): attach to a file whose
    /// header is still one to attach to and that someone else maps; `Gone` (start over) when
    /// it was removed, or initialised again since it was read; `Unused` when nobody else maps it.
    fn attach_shared(path: &Path, fd: OwnedFd, lock_wait: Duration) -> Result<Locked, Error> {
        let lock = FileLock::take(path, fd, lock_wait, libc::LOCK_SH)?;
        let st = check_file(path, lock.fd())?;
        let header = read_header(path, lock.fd())?;
        if st.st_nlink == 0
            || header.magic != MAGIC
            || header.made_before_this_boot()
            || header.made_in_another_pid_namespace()
        {
            return Ok(Locked::Gone);
        }
        if !in_use_by_others(lock.fd()) {
            return Ok(Locked::Unused(lock.release()));
        }
        Self::attach(path, lock.fd(), &header, st.st_size as usize, false).map(|mut seg| {
            seg.file = Some(lock.release());
            Locked::Ready(seg)
        })
    }

    /// Under the file's lock: attach if someone else initialised it meanwhile (forgetting what
    /// processes left in it when nobody else maps it, and taking it over from another pid
    /// namespace then), otherwise initialise it (a new file, a header-less one whose creator
    /// died, or one from an earlier boot).
    fn lock_and_init(
        path: &Path,
        cpath: &CString,
        fd: OwnedFd,
        slots: u32,
        lock_wait: Duration,
    ) -> Result<Locked, Error> {
        let lock = FileLock::take(path, fd, lock_wait, libc::LOCK_EX)?;
        let st = check_file(path, lock.fd())?;
        if st.st_nlink == 0 {
            return Ok(Locked::Gone); // a failed creator removed it while we waited
        }
        let header = read_header(path, lock.fd())?;
        if header.magic == MAGIC && !header.made_before_this_boot() {
            let unused = !in_use_by_others(lock.fd());
            let size = st.st_size as usize;
            let seg = Self::attach(path, lock.fd(), &header, size, unused).map(|mut seg| {
                if unused {
                    seg.forget_processes();
                }
                seg.file = Some(lock.release());
                Locked::Ready(seg)
            });
            return seg;
        }
        if header.magic == MAGIC {
            // Written before this boot: its times and pids mean nothing now. Start it afresh,
            // as a new file.
            let mut seg = Self::init(path, lock.fd(), slots)?;
            seg.file = Some(lock.release());
            return Ok(Locked::Ready(seg));
        }
        if header.magic != 0 {
            return Err(Error::segment(
                path,
                "is not a resilient segment (bad magic); remove it after stopping PHP",
            ));
        }
        if !half_made(&header, st.st_size as usize) {
            return Err(Error::segment(
                path,
                format!(
                    "has no header and is not a half-made segment (size {}); refusing to touch it",
                    st.st_size
                ),
            ));
        }
        match Self::init(path, lock.fd(), slots) {
            Ok(mut seg) => {
                seg.file = Some(lock.release());
                Ok(Locked::Ready(seg))
            }
            Err(e) => {
                // Nobody can be using a file without a header: remove it (if the path
                // still names it) so the next opener starts from scratch.
                if same_file(cpath, &st) {
                    // SAFETY: unlinking a path we just checked.
                    unsafe { libc::unlink(cpath.as_ptr()) };
                }
                Err(e)
            }
        }
    }

    /// Sizes, reserves and zeroes the file, maps it and writes the header (magic last).
    fn init(path: &Path, fd: &OwnedFd, slots: u32) -> Result<Segment, Error> {
        let len = crate::layout::segment_size(slots);
        let raw = fd.as_raw_fd();
        // SAFETY: plain syscalls on our descriptor; results checked. Truncating to 0 first
        // zeroes whatever a dead creator left.
        unsafe {
            if libc::ftruncate(raw, 0) != 0 || libc::ftruncate(raw, len as libc::off_t) != 0 {
                return Err(Error::segment(
                    path,
                    format!("cannot size it: {}", os_err()),
                ));
            }
            let rc = libc::posix_fallocate(raw, 0, len as libc::off_t);
            if rc != 0 {
                return Err(Error::segment(
                    path,
                    format!(
                        "cannot reserve {len} bytes for {slots} slots: {} (is the file system full? \
                         Docker's /dev/shm is 64 MB by default; lower resilient.shm_slots or \
                         free space)",
                        std::io::Error::from_raw_os_error(rc)
                    ),
                ));
            }
        }
        hold_in_use(path, fd)?;
        let mut seg = Self::map(path, fd, len, libc::MAP_SHARED)?;
        seg.slots = slots;
        seg.write_header(slots);
        Ok(seg)
    }

    /// A segment of the same layout over private anonymous memory: counts only this
    /// process (the degraded mode). `path` is the shared file it stands in for.
    pub fn local(path: &Path, slots: u32) -> Result<Segment, Error> {
        check_slots(slots)?;
        let len = crate::layout::segment_size(slots);
        // SAFETY: anonymous private mapping; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::segment(
                path,
                format!("cannot map process-local memory: {}", os_err()),
            ));
        }
        let seg = Segment {
            base: base as *mut u8,
            len,
            slots,
            path: path.to_path_buf(),
            file: None,
        };
        seg.write_header(slots);
        Ok(seg)
    }

    fn write_header(&self, slots: u32) {
        let h = self.header();
        h.pid_namespace
            .store(crate::host::pid_namespace(), Ordering::Relaxed);
        h.boot.store(crate::host::boot_id(), Ordering::Relaxed);
        h.version.store(LAYOUT_VERSION, Ordering::Relaxed);
        h.slots.store(slots, Ordering::Relaxed);
        h.entry_size.store(ENTRY_SIZE as u32, Ordering::Relaxed);
        h.total_size.store(self.len as u64, Ordering::Relaxed);
        h.magic.store(MAGIC, Ordering::Release);
    }

    /// Maps the file `h` was read from, under its lock (the caller sets `file`). `unused`:
    /// nobody else maps it, and it is taken over whatever pid namespace made it.
    fn attach(
        path: &Path,
        fd: &OwnedFd,
        h: &RawHeader,
        size: usize,
        unused: bool,
    ) -> Result<Segment, Error> {
        if h.version != LAYOUT_VERSION {
            return Err(Error::segment(
                path,
                format!(
                    "has layout version {}, this extension uses {LAYOUT_VERSION}; stop PHP and remove the file",
                    h.version
                ),
            ));
        }
        if h.made_in_another_pid_namespace() && !unused {
            return Err(Error::segment(
                path,
                format!(
                    "was created in another pid namespace (inode {}, ours {}) and is still in use \
                     there: holders are told apart by pid, so processes that share a segment must \
                     share a pid namespace; give each container its own resilient.shm_path (a \
                     file no process of another namespace maps any more is taken over)",
                    h.pid_namespace,
                    crate::host::pid_namespace()
                ),
            ));
        }
        let (slots, entry_size, total) = (h.slots, h.entry_size as usize, h.total_size as usize);
        if slots == 0
            || slots > MAX_SLOTS
            || entry_size != ENTRY_SIZE
            || total != size
            || total != crate::layout::segment_size(slots)
        {
            return Err(Error::segment(
                path,
                format!("is corrupt (slots {slots}, entry size {entry_size}, recorded size {total}, file size {size}); remove it after stopping PHP"),
            ));
        }
        hold_in_use(path, fd)?;
        let mut seg = Self::map(path, fd, total, libc::MAP_SHARED)?;
        seg.slots = slots;
        Ok(seg)
    }

    fn map(path: &Path, fd: &OwnedFd, len: usize, flags: libc::c_int) -> Result<Segment, Error> {
        // SAFETY: mapping a file we hold open, read-write; checked for failure.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(Error::segment(path, format!("cannot map it: {}", os_err())));
        }
        Ok(Segment {
            base: base as *mut u8,
            len,
            slots: 0,
            path: path.to_path_buf(),
            file: None,
        })
    }

    /// Forgets what processes now gone left in the file (nobody else maps it, and the caller
    /// holds the exclusive lock): the funnel slots they held, the attempts they had in flight,
    /// a learned limit's close they did not finish; and takes the file over for this process's
    /// pid namespace. Their pids can tell none of it (the kernel gives pids, and even a pid
    /// namespace's number, again). Budgets, breakers, counters and learned limits stay.
    fn forget_processes(&self) {
        let now_ms = crate::clock::monotonic_ms();
        for e in self.entries() {
            crate::funnel::forget_holders(e);
            crate::adaptive_limit::forget_closer(&e.adaptive, now_ms);
            e.metrics.in_flight.store(0, Ordering::Relaxed);
        }
        self.header()
            .pid_namespace
            .store(crate::host::pid_namespace(), Ordering::Release);
    }

    /// True for a process-local segment (the degraded mode).
    pub fn is_local(&self) -> bool {
        self.file.is_none()
    }

    /// False when the file under this mapping shrank, was removed or replaced since it was
    /// opened: then the mapping must not be used for new work (reopen the path). Two
    /// syscalls; always true for a process-local segment.
    pub fn still_valid(&self) -> bool {
        let Some(fd) = &self.file else {
            return true;
        };
        // SAFETY: zeroed stat buffers are valid out-parameters; results checked.
        unsafe {
            let mut st: libc::stat = std::mem::zeroed();
            if libc::fstat(fd.as_raw_fd(), &mut st) != 0
                || st.st_nlink == 0
                || (st.st_size as usize) < self.len
            {
                return false;
            }
            let Ok(cpath) = CString::new(self.path.as_os_str().as_bytes()) else {
                return false;
            };
            same_file(&cpath, &st)
        }
    }

    fn header(&self) -> &Header {
        // SAFETY: the mapping is at least HEADER_SIZE long and page-aligned.
        unsafe { &*(self.base as *const Header) }
    }

    pub(crate) fn entries(&self) -> &[Entry] {
        // SAFETY: validated: the mapping holds exactly `slots` entries after the header, and
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

    /// Keys in use, with their entry index: the names, and the keys of budgets and breakers
    /// (`name\u{1f}…`).
    #[cfg(test)]
    pub(crate) fn names(&self) -> Vec<(usize, String)> {
        self.entries()
            .iter()
            .enumerate()
            .filter(|(_, e)| e.hash.load(Ordering::Acquire) != 0)
            .map(|(i, e)| (i, table::read_name(e)))
            .collect()
    }

    /// The file's path (for a process-local segment: the file it stands in for).
    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn slots(&self) -> u32 {
        self.slots
    }

    /// Lets lease `id` (held by this process) lapse at `until_ms` instead of its own expiry,
    /// if sooner. False when it is no longer held by this process.
    pub(crate) fn expire_at(&self, id: crate::LeaseId, until_ms: u64) -> bool {
        id.holder_pid() == crate::liveness::current_pid()
            && crate::funnel::expire_slot_at(self.entry(id.entry), id, until_ms)
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
        // SAFETY: unmapping exactly what was mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// The checks every opener makes before reading a byte: a regular file of this user that
/// nobody else may read or write (metrics live in it).
fn check_file(path: &Path, fd: &OwnedFd) -> Result<libc::stat, Error> {
    // SAFETY: a zeroed stat is a valid out-buffer.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(Error::segment(path, format!("cannot stat: {}", os_err())));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err(Error::segment(path, "is not a regular file"));
    }
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    if st.st_uid != uid {
        return Err(Error::segment(
            path,
            format!(
                "is owned by uid {}, not by this process's uid {uid}; refusing a foreign file",
                st.st_uid
            ),
        ));
    }
    if st.st_nlink > 1 {
        return Err(Error::segment(
            path,
            format!("has {} hard links; refusing it", st.st_nlink),
        ));
    }
    if st.st_mode & 0o077 != 0 {
        return Err(Error::segment(
            path,
            format!(
                "is readable or writable by group or others (mode {:o}, must be 600); refusing it",
                st.st_mode & 0o777
            ),
        ));
    }
    // SAFETY: a zeroed statfs is a valid out-buffer.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(fd.as_raw_fd(), &mut fs) } == 0 {
        if let Some(kind) = shared_by_hosts(fs.f_type as i64) {
            return Err(Error::segment(
                path,
                format!(
                    "is on a file system that other hosts may mount ({kind}); the counters in \
                     shared memory belong to one host: use a local path such as /dev/shm, and \
                     the Redis backend to share limits across hosts"
                ),
            ));
        }
    }
    Ok(st)
}

/// The file systems (by `statfs`'s `f_type`) whose files other kernels may map at the same
/// time: network and cluster file systems, a VM's shared folders. A segment there would be
/// taken for one left by an earlier boot (its boot id is another kernel's) and wiped under
/// the processes of the other host, and its mappings are not coherent across hosts anyway.
fn shared_by_hosts(f_type: i64) -> Option<&'static str> {
    Some(match f_type {
        0x6969 => "nfs",
        0x517b => "smb",
        0xfe53_4d42 => "smb2",
        0xff53_4d42 => "cifs",
        0x0102_1997 => "9p",
        0x00c3_6400 => "ceph",
        0x5346_414f => "afs",
        0x0116_1970 => "gfs2",
        0x7461_636f => "ocfs2",
        0x0bd0_0bd0 => "lustre",
        0x786f_4256 => "vboxsf",
        _ => return None,
    })
}

/// Why an existing file cannot be opened, naming its owner when it is someone else's (a
/// file squatted by another user is the usual reason for EACCES).
fn open_failure(cpath: &CString, err: &std::io::Error) -> String {
    // SAFETY: a zeroed stat is a valid out-buffer; valid C string; geteuid cannot fail.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    let uid = unsafe { libc::geteuid() };
    if unsafe { libc::lstat(cpath.as_ptr(), &mut st) } == 0 && st.st_uid != uid {
        return format!(
            "cannot open: {err}; it is owned by uid {} (mode {:o}), not by this process's uid {uid}: \
             another user created it",
            st.st_uid,
            st.st_mode & 0o777
        );
    }
    format!("cannot open: {err}")
}

/// The header's fields, read with `pread` (a short file reads as zeroes).
struct RawHeader {
    /// The header's padding and reserved bytes are all zero.
    rest_zero: bool,
    magic: u64,
    version: u32,
    slots: u32,
    entry_size: u32,
    total_size: u64,
    pid_namespace: u64,
    boot: u64,
}

impl RawHeader {
    fn made_before_this_boot(&self) -> bool {
        !crate::host::same(self.boot, crate::host::boot_id())
    }

    fn made_in_another_pid_namespace(&self) -> bool {
        !crate::host::same(self.pid_namespace, crate::host::pid_namespace())
    }
}

fn read_header(path: &Path, fd: &OwnedFd) -> Result<RawHeader, Error> {
    let mut b = [0u8; HEADER_SIZE];
    let mut got = 0;
    while got < HEADER_SIZE {
        // SAFETY: reading into our own buffer, within its bounds.
        let n = unsafe {
            libc::pread(
                fd.as_raw_fd(),
                b[got..].as_mut_ptr().cast(),
                HEADER_SIZE - got,
                got as libc::off_t,
            )
        };
        match n {
            0 => break,
            n if n > 0 => got += n as usize,
            _ if os_err().raw_os_error() == Some(libc::EINTR) => {}
            _ => return Err(Error::segment(path, format!("cannot read: {}", os_err()))),
        }
    }
    let u32_at = |o: usize| u32::from_le_bytes(b[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(b[o..o + 8].try_into().unwrap());
    // Offsets of `layout::Header` (repr(C)).
    Ok(RawHeader {
        rest_zero: b[20..24].iter().chain(&b[48..]).all(|&x| x == 0),
        magic: u64_at(0),
        version: u32_at(8),
        slots: u32_at(12),
        entry_size: u32_at(16),
        total_size: u64_at(24),
        pid_namespace: u64_at(32),
        boot: u64_at(40),
    })
}

/// What a creator that died before storing the magic can leave: a file of size 0 (before
/// sizing) or of a table's size, whose header fields are each zero or what that creator was
/// writing. Recovery truncates the file, so anything else (a file that was never a segment,
/// e.g. a misconfigured `resilient.shm_path`) is left alone.
fn half_made(h: &RawHeader, size: usize) -> bool {
    let table = size > HEADER_SIZE
        && (size - HEADER_SIZE).is_multiple_of(ENTRY_SIZE)
        && (size - HEADER_SIZE) / ENTRY_SIZE <= MAX_SLOTS as usize;
    (size == 0 || table)
        && h.magic == 0
        && h.rest_zero
        && (h.version == 0 || h.version == LAYOUT_VERSION)
        && (h.entry_size == 0 || h.entry_size as usize == ENTRY_SIZE)
        && (h.total_size == 0 || h.total_size as usize == size)
        && (h.slots == 0 || crate::layout::segment_size(h.slots) == size)
        && !h.made_in_another_pid_namespace()
        && !h.made_before_this_boot()
}

/// True when `cpath` (not followed if a symlink) names the file of `st`.
fn same_file(cpath: &CString, st: &libc::stat) -> bool {
    // SAFETY: a zeroed stat is a valid out-buffer; valid C string.
    let mut now: libc::stat = unsafe { std::mem::zeroed() };
    let found = unsafe { libc::lstat(cpath.as_ptr(), &mut now) } == 0;
    found && now.st_dev == st.st_dev && now.st_ino == st.st_ino
}

/// A `flock` on the segment file (exclusive to initialise it, shared to attach), held while
/// the descriptor is ours (the kernel releases it when its holder dies, so a dead creator
/// never blocks anyone).
struct FileLock(OwnedFd);

impl FileLock {
    /// `how`: `LOCK_EX` or `LOCK_SH`. Waits at most `wait` for a conflicting holder (an
    /// initialiser, an opener taking a file nobody else maps over, or openers attaching).
    fn take(path: &Path, fd: OwnedFd, wait: Duration, how: libc::c_int) -> Result<FileLock, Error> {
        let deadline = Instant::now() + wait;
        loop {
            // SAFETY: flock on our descriptor.
            if unsafe { libc::flock(fd.as_raw_fd(), how | libc::LOCK_NB) } == 0 {
                return Ok(FileLock(fd));
            }
            let err = os_err();
            if !matches!(
                err.raw_os_error(),
                Some(libc::EWOULDBLOCK) | Some(libc::EINTR)
            ) {
                return Err(Error::segment(path, format!("cannot lock: {err}")));
            }
            if Instant::now() >= deadline {
                let message = match wait.as_millis() {
                    0 => "is being initialised or opened by another process (it holds the file's \
                          lock); not waited for"
                        .to_owned(),
                    ms => format!(
                        "is still being initialised or opened by another process after {ms} ms \
                         (is it stopped?)"
                    ),
                };
                return Err(Error::segment(path, message));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    fn fd(&self) -> &OwnedFd {
        &self.0
    }

    /// Unlocks and hands the descriptor back. (Dropping the lock closes the descriptor,
    /// which unlocks too.)
    fn release(self) -> OwnedFd {
        // SAFETY: unlocking our own descriptor.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
        self.0
    }
}

/// The file's first byte, which every process that maps the segment holds a read lock on.
fn first_byte(kind: libc::c_int) -> libc::flock {
    // SAFETY: a zeroed flock is valid (l_pid must be 0 for an open file description lock).
    let mut l: libc::flock = unsafe { std::mem::zeroed() };
    l.l_type = kind as libc::c_short;
    l.l_whence = libc::SEEK_SET as libc::c_short;
    l.l_len = 1;
    l
}

/// Marks the file in use by this process for as long as `fd` (or a copy of it, in a forked
/// child) stays open: a read lock of its open file description, which no one ever contends
/// (nobody takes a write lock; [`in_use_by_others`] only asks).
fn hold_in_use(path: &Path, fd: &OwnedFd) -> Result<(), Error> {
    let l = first_byte(libc::F_RDLCK);
    // SAFETY: fcntl on our descriptor with a valid flock.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_SETLK, &l) } != 0 {
        return Err(Error::segment(
            path,
            format!("cannot mark it in use (a read lock on it): {}", os_err()),
        ));
    }
    Ok(())
}

/// Whether a process other than this descriptor's holder maps the file now (holds the read
/// lock of [`hold_in_use`]). When the kernel cannot say, in use.
fn in_use_by_others(fd: &OwnedFd) -> bool {
    let mut l = first_byte(libc::F_WRLCK);
    // SAFETY: fcntl on our descriptor with a valid flock, which it fills in.
    let rc = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_OFD_GETLK, &mut l) };
    rc != 0 || l.l_type != libc::F_UNLCK as libc::c_short
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
    fn a_file_of_another_pid_namespace_is_refused() {
        let p = temp_path("pidns");
        let a = Segment::open(&p, 8).unwrap();
        assert_eq!(
            a.header().pid_namespace.load(Ordering::Relaxed),
            crate::host::pid_namespace()
        );
        a.header().pid_namespace.store(12345, Ordering::Relaxed);
        let e = Segment::open(&p, 8).err().unwrap();
        assert!(e.to_string().contains("another pid namespace"), "{e}");
        assert!(e.to_string().contains("still in use there"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    /// A container restarted in a new pid namespace with its `/dev/shm` kept finds the file
    /// its previous processes made: nobody maps it any more, so it is taken over, what those
    /// processes held forgotten and the rest kept (before, it was refused for good, and every
    /// process of the new container counted alone until someone removed the file). A process
    /// still mapping it, also one forked off after it opened, keeps it refused.
    #[test]
    fn a_file_of_another_pid_namespace_nobody_maps_is_taken_over() {
        let p = temp_path("pidns-left");
        let a = Segment::open(&p, 8).unwrap();
        let i = a.entry_index("sap").unwrap();
        a.entries()[i].budget_buckets[0].store(77, Ordering::Relaxed);
        a.header().pid_namespace.store(12345, Ordering::Relaxed);
        let copy = a.file.as_ref().unwrap().try_clone().unwrap();
        drop(a);
        let e = Segment::open(&p, 8).err().unwrap();
        assert!(
            e.to_string().contains("still in use there"),
            "a copy of the descriptor (a forked child's) still holds it: {e}"
        );
        drop(copy);
        let b = Segment::open(&p, 4).unwrap();
        assert_eq!(
            b.header().pid_namespace.load(Ordering::Relaxed),
            crate::host::pid_namespace()
        );
        assert_eq!(b.slots(), 8, "the same file, not initialised again");
        assert_eq!(b.entry_index("sap").unwrap(), i, "its names kept");
        assert_eq!(b.entries()[i].budget_buckets[0].load(Ordering::Relaxed), 77);
        let c = Segment::open(&p, 8).unwrap();
        assert_eq!(c.entry_index("sap").unwrap(), i, "one segment again");
        std::fs::remove_file(&p).unwrap();
    }

    /// What processes left in a file nobody maps any more is forgotten by its next opener:
    /// their funnel slots (held here by this process's own pid, alive, as a pid the kernel gave
    /// again to another process would be), their attempts in flight, a learned limit's close
    /// they did not finish. While someone maps it, nothing is.
    #[test]
    fn a_file_nobody_maps_forgets_what_processes_left_in_it() {
        let p = temp_path("left");
        let a = std::sync::Arc::new(Segment::open(&p, 8).unwrap());
        let f = crate::Funnel::new(
            a.clone(),
            "sap",
            crate::FunnelConfig::new(4, 0, Duration::from_secs(60)).unwrap(),
        )
        .unwrap();
        let now = crate::clock::monotonic_ms();
        f.try_acquire(4, now).unwrap().hold_until(now + 60_000);
        let i = a.entry_index("sap").unwrap();
        a.entries()[i].metrics.in_flight.store(1, Ordering::Relaxed);
        use crate::adaptive_limit::state_word;
        let closing = state_word::closing(state_word::pack_state(1_000, 3.0), 12_345);
        a.entries()[i]
            .adaptive
            .state
            .store(closing, Ordering::Relaxed);
        let still = Segment::open(&p, 8).unwrap();
        assert_eq!(f.in_flight(crate::clock::monotonic_ms()), 1, "mapped: kept");
        drop(still);
        drop(f);
        drop(a);

        let b = Segment::open(&p, 8).unwrap();
        let e = &b.entries()[i];
        assert_eq!(
            e.funnel_mask.load(Ordering::Relaxed),
            0,
            "the slot forgotten"
        );
        assert_eq!(e.metrics.in_flight.load(Ordering::Relaxed), 0);
        let state = e.adaptive.state.load(Ordering::Relaxed);
        assert_ne!(state, closing, "the close given up");
        assert_eq!(state_word::limit(state), 3.0, "at the limit of before");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn file_systems_other_hosts_mount_are_told_apart_from_local_ones() {
        for (f_type, kind) in [(0x6969, "nfs"), (0xff53_4d42, "cifs"), (0x0102_1997, "9p")] {
            assert_eq!(shared_by_hosts(f_type), Some(kind));
        }
        // tmpfs, ext4, xfs, btrfs, overlayfs (a container's root).
        for local in [0x0102_1994, 0xef53, 0x5846_5342, 0x9123_683e, 0x794c_7630] {
            assert_eq!(shared_by_hosts(local), None, "{local:#x}");
        }
        // Where the tests run (/dev/shm or the temp dir) is local: the segment opens.
        let p = temp_path("localfs");
        Segment::open(&p, 8).unwrap();
        let _ = std::fs::remove_file(&p);
    }

    #[test]
    fn a_file_from_an_earlier_boot_starts_afresh() {
        let p = temp_path("boot");
        let a = Segment::open(&p, 8).unwrap();
        a.entry_index("sap").unwrap();
        a.header()
            .boot
            .store(crate::host::boot_id() ^ 1, Ordering::Relaxed);
        drop(a);
        let b = Segment::open(&p, 4).unwrap();
        assert_eq!(
            b.header().boot.load(Ordering::Relaxed),
            crate::host::boot_id()
        );
        assert_eq!(
            b.slots(),
            4,
            "initialised again, with this opener's slot count"
        );
        assert!(b.names().is_empty(), "nothing of the earlier boot is kept");
        let c = Segment::open(&p, 8).unwrap();
        assert_eq!(c.slots(), 4, "and then shared as usual");
        std::fs::remove_file(&p).unwrap();
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
    fn refuses_wrong_version_and_symlink() {
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
    }

    #[test]
    fn a_header_less_file_of_a_dead_creator_is_recovered() {
        // What a creator killed before storing the magic leaves: an empty file, or a sized
        // one full of zeroes or half-written entries.
        for (i, len) in [
            0usize,
            crate::layout::segment_size(4),
            crate::layout::segment_size(9),
        ]
        .into_iter()
        .enumerate()
        {
            let p = temp_path("headerless");
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .write(true)
                .mode_0600()
                .open(&p)
                .unwrap();
            let mut junk = vec![0u8; len];
            if len > HEADER_SIZE {
                junk[HEADER_SIZE..].fill(0x5A); // entries written, header not yet
            }
            if i == 2 {
                // Killed while writing the header: version and slots stored, magic not.
                junk[8..12].copy_from_slice(&LAYOUT_VERSION.to_le_bytes());
                junk[12..16].copy_from_slice(&9u32.to_le_bytes());
            }
            f.write_all(&junk).unwrap();
            let s = Segment::open(&p, 4).unwrap();
            assert_eq!(s.slots(), 4);
            assert_eq!(
                s.names(),
                vec![],
                "recovery must zero what the dead creator left"
            );
            assert!(s.entry_index("a").is_ok());
            assert_eq!(Segment::open(&p, 9).unwrap().slots(), 4);
            std::fs::remove_file(&p).unwrap();
        }
    }

    #[test]
    fn a_header_less_file_that_is_not_half_made_is_left_alone() {
        // Leading zeroes but not a segment's size, or a non-zero byte in the header area:
        // not something our creator leaves, so recovery (which truncates) must not touch it.
        let size = crate::layout::segment_size(4);
        for (len, poke) in [(100usize, None), (size + 1, None), (size, Some(40usize))] {
            let p = temp_path("notours");
            let mut bytes = vec![0u8; len];
            if let Some(at) = poke {
                bytes[at] = 1;
            }
            std::fs::write(&p, &bytes).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o600)).unwrap();
            let e = Segment::open(&p, 4).err().unwrap();
            assert!(e.to_string().contains("not a half-made segment"), "{e}");
            assert_eq!(std::fs::read(&p).unwrap(), bytes, "must not be modified");
            std::fs::remove_file(&p).unwrap();
        }
    }

    #[test]
    fn refuses_a_hard_linked_file() {
        let p = temp_path("hardlink");
        drop(Segment::open(&p, 4).unwrap());
        let q = temp_path("hardlink2");
        std::fs::hard_link(&p, &q).unwrap();
        let e = Segment::open(&p, 4).err().unwrap();
        assert!(e.to_string().contains("2 hard links"), "{e}");
        std::fs::remove_file(&q).unwrap();
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn an_opener_waits_for_a_live_initialiser_lock_then_proceeds() {
        let p = temp_path("locked");
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .mode_0600()
            .open(&p)
            .unwrap();
        use std::os::fd::AsRawFd;
        assert_eq!(unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) }, 0);
        let t0 = Instant::now();
        let holder = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(150));
            drop(f); // the "creator" dies: its lock goes with it
        });
        let s = Segment::open(&p, 4).unwrap();
        let waited = t0.elapsed();
        holder.join().unwrap();
        assert!(waited >= Duration::from_millis(140), "{waited:?}");
        assert_eq!(s.slots(), 4);
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn refuses_a_file_readable_by_group_or_others() {
        let p = temp_path("readable");
        drop(Segment::open(&p, 4).unwrap());
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = Segment::open(&p, 4).err().unwrap();
        assert!(e.is_segment() && e.to_string().contains("mode 644"), "{e}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn still_valid_notices_a_shrunk_removed_or_replaced_file() {
        let p = temp_path("valid");
        let s = Segment::open(&p, 4).unwrap();
        assert!(s.still_valid());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(10)
            .unwrap();
        assert!(!s.still_valid(), "shrunk");
        std::fs::remove_file(&p).unwrap();
        let s = Segment::open(&p, 4).unwrap();
        std::fs::remove_file(&p).unwrap();
        assert!(!s.still_valid(), "removed");
        let _other = Segment::open(&p, 4).unwrap();
        assert!(!s.still_valid(), "replaced");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn a_local_segment_has_the_same_layout_and_no_file() {
        let p = temp_path("local");
        let s = Segment::local(&p, 3).unwrap();
        assert!(s.is_local() && s.still_valid());
        assert!(!p.exists());
        for n in ["a", "b", "c"] {
            s.entry_index(n).unwrap();
        }
        assert!(s.entry_index("d").unwrap_err().is_table_full());
        assert!(Segment::local(&p, 0).err().unwrap().is_invalid_argument());
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
            e.is_table_full() && e.to_string().contains("all 3 entries are in use"),
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
