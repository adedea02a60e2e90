//! One funnel slot's word: who owns the slot, in which phase, and its generation.
//!
//! ```text
//! bits 63..42  pid         (22 bits: Linux pids stay below 2^22)
//! bits 41..40  phase       Free, Claiming, Held, Clearing
//! bits 39..0   generation  one more for every lease of the slot (kept when it is freed)
//! ```
//! A word value is never reused for the same slot (2^40 leases would be needed), so a stale
//! owner's compare-and-swap cannot succeed on a newer lease (no ABA). When a lease expires is
//! kept beside the word (`LeaseSlot::expires_ms`), so a short lease never inherits a long one's
//! expiry.

const GENERATION_BITS: u32 = 40;
const GENERATION_MASK: u64 = (1 << GENERATION_BITS) - 1;
const PHASE_SHIFT: u32 = GENERATION_BITS;
const PID_SHIFT: u32 = GENERATION_BITS + 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Nobody owns the slot; its mask bit is clear.
    Free = 0,
    /// An acquirer owns the word and is about to set the bit (or give the word back).
    Claiming = 1,
    /// A lease: the bit is set; the holder or, after it expires, a reclaimer may take it.
    Held = 2,
    /// A releaser or reclaimer owns the word and is clearing the bit.
    Clearing = 3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotWord(pub(crate) u64);

impl SlotWord {
    pub(crate) fn new(pid: u32, phase: Phase, generation: u64) -> SlotWord {
        debug_assert!(pid < 1 << 22, "pid {pid} does not fit in 22 bits");
        SlotWord(
            (pid as u64) << PID_SHIFT
                | (phase as u64) << PHASE_SHIFT
                | (generation & GENERATION_MASK),
        )
    }

    pub(crate) fn free(generation: u64) -> SlotWord {
        SlotWord::new(0, Phase::Free, generation)
    }

    /// The next lease of this (free) slot: owned by `pid`, being claimed, one generation on.
    pub(crate) fn next_claim(self, pid: u32) -> SlotWord {
        SlotWord::new(pid, Phase::Claiming, self.generation().wrapping_add(1))
    }

    pub(crate) fn pid(self) -> u32 {
        (self.0 >> PID_SHIFT) as u32
    }

    pub(crate) fn phase(self) -> Phase {
        match (self.0 >> PHASE_SHIFT) & 3 {
            0 => Phase::Free,
            1 => Phase::Claiming,
            2 => Phase::Held,
            _ => Phase::Clearing,
        }
    }

    pub(crate) fn generation(self) -> u64 {
        self.0 & GENERATION_MASK
    }

    /// The same owner and generation in another phase.
    pub(crate) fn with_phase(self, phase: Phase) -> SlotWord {
        SlotWord::new(self.pid(), phase, self.generation())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let top = GENERATION_MASK;
        for phase in [Phase::Free, Phase::Claiming, Phase::Held, Phase::Clearing] {
            let w = SlotWord::new(4_194_303, phase, top);
            assert_eq!(
                (w.pid(), w.phase(), w.generation()),
                (4_194_303, phase, top)
            );
        }
        assert_eq!(SlotWord::free(0).0, 0, "a zeroed segment is all free slots");
        let next = SlotWord::free(7).next_claim(9);
        assert_eq!(
            (next.pid(), next.phase(), next.generation()),
            (9, Phase::Claiming, 8)
        );
        assert_eq!(
            SlotWord::free(top).next_claim(9).generation(),
            0,
            "wraps after 2^40"
        );
        assert_eq!(
            SlotWord::new(7, Phase::Held, 9)
                .with_phase(Phase::Clearing)
                .pid(),
            7
        );
    }
}
