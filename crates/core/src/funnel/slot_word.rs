//! One funnel slot's word: who owns the slot, in which phase, and a stamp.
//!
//! ```text
//! bits 63..42  pid     (22 bits: Linux pids stay below 2^22)
//! bits 41..40  phase   Free, Claiming, Held, Clearing
//! bits 39..0   stamp   monotonic ms: when the lease expires (kept when the slot is freed)
//! ```
//! A slot's stamps only grow (a new lease stamps at least one more than the last), so a word
//! value is never reused for the same slot: a stale owner's compare-and-swap cannot succeed
//! on a newer lease (no ABA).

const STAMP_BITS: u32 = 40;
const STAMP_MASK: u64 = (1 << STAMP_BITS) - 1;
const PHASE_SHIFT: u32 = STAMP_BITS;
const PID_SHIFT: u32 = STAMP_BITS + 2;

/// The largest stamp: about 34 years of monotonic milliseconds.
pub(crate) const MAX_STAMP: u64 = STAMP_MASK;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Nobody owns the slot; its mask bit is clear.
    Free = 0,
    /// An acquirer owns the word and is about to set the bit (or give the word back).
    Claiming = 1,
    /// A lease: the bit is set; the holder or, after expiry, a reclaimer may take it.
    Held = 2,
    /// A releaser or reclaimer owns the word and is clearing the bit.
    Clearing = 3,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SlotWord(pub(crate) u64);

impl SlotWord {
    pub(crate) fn new(pid: u32, phase: Phase, stamp: u64) -> SlotWord {
        debug_assert!(pid < 1 << 22, "pid {pid} does not fit in 22 bits");
        SlotWord((pid as u64) << PID_SHIFT | (phase as u64) << PHASE_SHIFT | stamp.min(MAX_STAMP))
    }

    pub(crate) fn free(stamp: u64) -> SlotWord {
        SlotWord::new(0, Phase::Free, stamp)
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

    pub(crate) fn stamp(self) -> u64 {
        self.0 & STAMP_MASK
    }

    /// The same owner and stamp in another phase.
    pub(crate) fn with_phase(self, phase: Phase) -> SlotWord {
        SlotWord::new(self.pid(), phase, self.stamp())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        for phase in [Phase::Free, Phase::Claiming, Phase::Held, Phase::Clearing] {
            let w = SlotWord::new(4_194_303, phase, MAX_STAMP);
            assert_eq!(
                (w.pid(), w.phase(), w.stamp()),
                (4_194_303, phase, MAX_STAMP)
            );
        }
        assert_eq!(SlotWord::free(0).0, 0, "a zeroed segment is all free slots");
        assert_eq!(SlotWord::new(7, Phase::Held, u64::MAX).stamp(), MAX_STAMP);
        assert_eq!(
            SlotWord::new(7, Phase::Held, 9)
                .with_phase(Phase::Clearing)
                .pid(),
            7
        );
    }
}
