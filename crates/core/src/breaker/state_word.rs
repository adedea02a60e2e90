//! The breaker's one state word: `phase:2 | generation:22 | at_ms:40`.
//!
//! Every transition is one compare-and-swap from the exact current word to a word with the
//! next generation, so a word is never seen twice (until the generation wraps after 4 million
//! transitions): a probe ticket *is* the half-open word that granted it, and a late report of
//! a ticket that was given up fails its CAS instead of deciding for a newer probe (no ABA).
//! `at_ms` is monotonic ms: 40 bits last 34 years of uptime.

/// Where the breaker stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Attempts go through and are counted; `at_ms` is when it closed (counts older than that
    /// bucket are from before the last outage and are ignored).
    Closed,
    /// Attempts are refused until `at_ms` (the jittered end of `open_for`).
    Open,
    /// One probe was let through; its ticket is given up at `at_ms` if it never reports.
    HalfOpen,
}

const AT_BITS: u32 = 40;
const GEN_BITS: u32 = 22;
pub(crate) const AT_MAX: u64 = (1 << AT_BITS) - 1;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct StateWord(pub u64);

impl StateWord {
    pub(crate) fn new(phase: Phase, generation: u64, at_ms: u64) -> Self {
        let p = match phase {
            Phase::Closed => 0,
            Phase::Open => 1,
            Phase::HalfOpen => 2,
        };
        StateWord(
            p << (GEN_BITS + AT_BITS) | (generation & GEN_MASK) << AT_BITS | at_ms.min(AT_MAX),
        )
    }

    /// The phase; a corrupt word (phase bits 3) reads as closed, and any transition replaces it.
    pub(crate) fn phase(self) -> Phase {
        match self.0 >> (GEN_BITS + AT_BITS) {
            1 => Phase::Open,
            2 => Phase::HalfOpen,
            _ => Phase::Closed,
        }
    }

    pub(crate) fn generation(self) -> u64 {
        (self.0 >> AT_BITS) & GEN_MASK
    }

    pub(crate) fn at_ms(self) -> u64 {
        self.0 & AT_MAX
    }

    /// The word a transition from this one to `phase` writes.
    pub(crate) fn next(self, phase: Phase, at_ms: u64) -> Self {
        StateWord::new(phase, self.generation().wrapping_add(1), at_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_every_transition_is_a_new_word() {
        let w = StateWord::new(Phase::HalfOpen, 7, 123_456);
        assert_eq!(
            (w.phase(), w.generation(), w.at_ms()),
            (Phase::HalfOpen, 7, 123_456)
        );
        assert_eq!(StateWord(0).phase(), Phase::Closed, "all zero is closed");
        let n = w.next(Phase::HalfOpen, 123_456);
        assert_ne!(n, w, "same phase and time, still another word");
        assert_eq!(
            StateWord::new(Phase::Open, GEN_MASK, 1)
                .next(Phase::Open, 1)
                .generation(),
            0
        );
        assert_eq!(
            StateWord::new(Phase::Open, 0, u64::MAX).at_ms(),
            AT_MAX,
            "clamped"
        );
        assert_eq!(StateWord(3 << 62).phase(), Phase::Closed);
    }
}
