//! Names to entries: open addressing with linear probing over a fixed table.
//!
//! The 64-bit FNV-1a hash is the identity (a collision between two distinct names is a
//! 2^-64 event); claiming an entry is one CAS of its hash word from 0, so there is no lock
//! a dying process could leave behind. The name bytes are written after the claim and are
//! only read for display (metrics).

use crate::layout::{Entry, NAME_WORDS};
use std::sync::atomic::Ordering;

/// Stable across processes and releases (unlike std's hasher).
pub(crate) fn name_hash(name: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in name.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    if h == 0 {
        1
    } else {
        h
    }
}

/// Finds the entry of `name` or claims a free one. `None` when the table is full.
pub(crate) fn find_or_claim(entries: &[Entry], name: &str) -> Option<usize> {
    let h = name_hash(name);
    let n = entries.len();
    let start = (h % n as u64) as usize;
    for i in 0..n {
        let idx = (start + i) % n;
        let e = &entries[idx];
        let cur = e.hash.load(Ordering::Acquire);
        if cur == h {
            return Some(idx);
        }
        if cur == 0 {
            match e
                .hash
                .compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    write_name(e, name);
                    return Some(idx);
                }
                Err(other) if other == h => return Some(idx),
                Err(_) => continue,
            }
        }
    }
    None
}

fn write_name(e: &Entry, name: &str) {
    let bytes = name.as_bytes();
    for w in 0..NAME_WORDS {
        let mut word = [0u8; 8];
        for (j, b) in word.iter_mut().enumerate() {
            if let Some(v) = bytes.get(w * 8 + j) {
                *b = *v;
            }
        }
        e.name[w].store(u64::from_le_bytes(word), Ordering::Relaxed);
    }
    e.name_len.store(bytes.len() as u64, Ordering::Release);
}

/// The stored name of an entry (empty while a claimer is still writing it).
pub(crate) fn read_name(e: &Entry) -> String {
    let mut buf = [0u8; NAME_WORDS * 8];
    String::from_utf8_lossy(name_bytes(e, &mut buf)).into_owned()
}

/// The stored name's bytes, copied into `buf` (no allocation: metrics read every name on
/// each snapshot). Only the words the length covers are read.
pub(crate) fn name_bytes<'b>(e: &Entry, buf: &'b mut [u8; NAME_WORDS * 8]) -> &'b [u8] {
    let len = (e.name_len.load(Ordering::Acquire) as usize).min(NAME_WORDS * 8);
    for (word, chunk) in e
        .name
        .iter()
        .zip(buf.chunks_exact_mut(8))
        .take(len.div_ceil(8))
    {
        chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
    }
    &buf[..len]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_is_stable_and_nonzero() {
        assert_eq!(name_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(name_hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_ne!(name_hash("sap"), name_hash("shipping"));
    }
}
