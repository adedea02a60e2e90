//! Names to entries: open addressing with linear probing over a fixed table.
//!
//! Claiming an entry is one CAS of its 64-bit FNV-1a hash word from 0, so there is no lock a
//! dying process could leave behind; the name's bytes (the first 64, and its length) are
//! written right after the claim. A lookup goes by the hash and then compares the stored
//! name: FNV-1a is not keyed, and two names chosen to collide (found in minutes) would
//! otherwise share one funnel, budget and metrics. A name whose claimer has not written it yet
//! is waited for briefly; one that never comes (the claimer died in between) is taken on its
//! hash alone, as before names were compared, and written by that lookup.

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

/// The entries a name of hash `h` may sit in, in the order they are tried.
fn probe(entries: &[Entry], h: u64) -> impl Iterator<Item = (usize, &Entry)> {
    let n = entries.len();
    let start = (h % n as u64) as usize;
    (0..n).map(move |i| {
        let idx = (start + i) % n;
        (idx, &entries[idx])
    })
}

/// Finds the entry of `name` or claims a free one. `None` when the table is full.
pub(crate) fn find_or_claim(entries: &[Entry], name: &str) -> Option<usize> {
    let h = name_hash(name);
    for (idx, e) in probe(entries, h) {
        let mut cur = e.hash.load(Ordering::Acquire);
        if cur == 0 {
            match e
                .hash
                .compare_exchange(0, h, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    write_name(e, name);
                    return Some(idx);
                }
                Err(other) => cur = other,
            }
        }
        if cur == h && holds(e, name) {
            return Some(idx);
        }
    }
    None
}

/// Finds the entry of `name`, claiming none.
pub(crate) fn find(entries: &[Entry], name: &str) -> Option<usize> {
    let h = name_hash(name);
    for (idx, e) in probe(entries, h) {
        match e.hash.load(Ordering::Acquire) {
            0 => return None,
            cur if cur == h && holds(e, name) => return Some(idx),
            _ => {}
        }
    }
    None
}

/// How long a lookup waits for a claimer to write the name it claimed (a few stores; longer
/// only if the claimer was descheduled right in between).
const NAME_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// Whether the entry (whose hash is `name`'s) holds `name`: the same length and first bytes.
fn holds(e: &Entry, name: &str) -> bool {
    let mut len = e.name_len.load(Ordering::Acquire);
    if len == 0 {
        let since = std::time::Instant::now();
        while len == 0 && since.elapsed() < NAME_WAIT {
            std::thread::yield_now();
            len = e.name_len.load(Ordering::Acquire);
        }
        if len == 0 {
            // Its claimer died before writing it: the hash decides, and the name is written
            // for it, so that no later lookup waits again and snapshots list the name. (A
            // claimer only slow to write it writes the same name, short of an FNV collision.)
            write_name(e, name);
            return true;
        }
    }
    let mut buf = [0u8; NAME_WORDS * 8];
    let stored = name_bytes(e, &mut buf);
    let bytes = name.as_bytes();
    len == bytes.len() as u64 && bytes.starts_with(stored)
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
#[cfg(test)]
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

    /// Two names found to collide (a Pollard-rho search on 16 hex characters, minutes on one
    /// core): each gets its own entry, and each finds its own again.
    #[test]
    fn names_whose_hashes_collide_get_entries_of_their_own() {
        let (a, b) = ("c5bde799c2362419", "a1a9a9bf38687075");
        assert_eq!(name_hash(a), name_hash(b));
        let entries: Vec<Entry> = (0..8).map(|_| unsafe { std::mem::zeroed() }).collect();
        let ia = find_or_claim(&entries, a).unwrap();
        let ib = find_or_claim(&entries, b).unwrap();
        assert_ne!(ia, ib);
        assert_eq!(find_or_claim(&entries, a), Some(ia));
        assert_eq!(find_or_claim(&entries, b), Some(ib));
        assert_eq!((find(&entries, a), find(&entries, b)), (Some(ia), Some(ib)));
        assert_eq!(find(&entries, "other"), None);
    }

    /// A claimer killed between its claim (the hash) and writing the name: the first lookup
    /// waits for it, takes the entry on its hash and writes the name for it, so that no later
    /// lookup waits again (every client of that name would otherwise pay `NAME_WAIT` for good)
    /// and snapshots list the name.
    #[test]
    fn a_name_its_claimer_never_wrote_is_written_by_the_first_lookup() {
        let entries: Vec<Entry> = (0..8).map(|_| unsafe { std::mem::zeroed() }).collect();
        let name = "shipping";
        let h = name_hash(name);
        let claimed = (h % entries.len() as u64) as usize;
        entries[claimed].hash.store(h, Ordering::Release);
        assert_eq!(read_name(&entries[claimed]), "");

        assert_eq!(find_or_claim(&entries, name), Some(claimed));
        assert_eq!(read_name(&entries[claimed]), name);
        assert_eq!(
            entries[claimed].name_len.load(Ordering::Acquire),
            name.len() as u64
        );
        assert_eq!(find(&entries, name), Some(claimed));
    }

    /// A key longer than the stored 64 bytes is told apart by its length and first bytes.
    #[test]
    fn a_long_key_matches_by_its_length_and_first_bytes() {
        let entries: Vec<Entry> = (0..4).map(|_| unsafe { std::mem::zeroed() }).collect();
        let long = format!("{}\u{1f}0.1/5/10", "n".repeat(64));
        let i = find_or_claim(&entries, &long).unwrap();
        assert_eq!(find_or_claim(&entries, &long), Some(i));
        assert!(holds(&entries[i], &long));
        assert!(!holds(&entries[i], &"n".repeat(64)));
    }
}
