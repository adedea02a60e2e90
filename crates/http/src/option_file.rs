//! Files named by options (`verify`, `cert`, `ssl_key`, a Redis `ca`, `sink`), checked when the
//! option is read, on PHP's thread: a check must never wait nor read without bound. A FIFO's
//! open waits for a peer and `/dev/zero` never ends, so only what each option can use is
//! accepted, and refused at once otherwise, naming the option and the path (never the content).

use std::fs::Metadata;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::Path;

use crate::ConfigError;

/// The most a PEM file read for an option may hold: a bundle of every public root CA is
/// about 250 KB.
pub const MAX_PEM_FILE: u64 = 4 << 20;

/// Reads the PEM file an option names: a regular file of at most [`MAX_PEM_FILE`] bytes,
/// opened without waiting and read no further than that.
pub fn read_pem(option: &str, path: &Path) -> Result<Vec<u8>, ConfigError> {
    let fail = |e: std::io::Error| {
        ConfigError::new(option, format!("cannot read {}: {e}", path.display()))
    };
    let too_big = || {
        ConfigError::new(
            option,
            format!(
                "{} is larger than {MAX_PEM_FILE} bytes: not a PEM file",
                path.display()
            ),
        )
    };
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(fail)?;
    let meta = file.metadata().map_err(fail)?;
    if !meta.is_file() {
        return Err(ConfigError::new(
            option,
            format!("{} is not a regular file ({})", path.display(), kind(&meta)),
        ));
    }
    if meta.len() > MAX_PEM_FILE {
        return Err(too_big());
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(MAX_PEM_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(fail)?;
    if bytes.len() as u64 > MAX_PEM_FILE {
        return Err(too_big()); // it grew while read
    }
    Ok(bytes)
}

/// What a path that is not a regular file is, in words.
fn kind(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a file"
    }
}
