//! The learned limit's state word: the limit, and either when the current interval began or
//! which process is closing it.
//!
//! - `0`: nothing learnt yet (the config's `initial` applies).
//! - `interval_start_ms:40 | limit × 256:24`: the interval that began then runs.
//! - `1:1 | 0:7 | closer_pid:32 | limit × 256:24`: process `closer_pid` is closing it.
//!
//! The limit is in every form, so a reader of the limit never waits for a close. A close is one
//! process's from its claim (a CAS from the running word) to its publication of the next
//! running word: while it lasts nobody else touches the sums or the estimates, so a closer that
//! is paused in between, however long, finds everything as it left it. A closer that died is
//! told by its pid, as a funnel slot's holder is: the next attempt to end starts a new interval.
//! (A process of an earlier build of this layout reads the closing form as an interval that
//! began 17 years from now: it leaves it alone.)

/// Fixed point of the stored limit: 1/256 of a slot.
pub(crate) const LIMIT_ONE: f64 = 256.0;
const LIMIT_BITS: u32 = 24;
pub(crate) const LIMIT_MASK: u64 = (1 << LIMIT_BITS) - 1;
/// The closing form's mark; a start never reaches it (2^39 ms is 17 years of uptime).
const CLOSING: u64 = 1 << 63;
const START_MAX: u64 = (1 << 39) - 1;

/// What a state word says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    NotStarted,
    /// The interval that began at `start_ms` runs.
    Running {
        start_ms: u64,
    },
    /// Process `pid` is closing the interval.
    Closing {
        pid: u32,
    },
}

/// The running word of an interval that begins at `start_ms` under `limit`.
pub(crate) fn pack_state(start_ms: u64, limit: f64) -> u64 {
    let fp = (limit * LIMIT_ONE)
        .round()
        .clamp(LIMIT_ONE, LIMIT_MASK as f64) as u64;
    start_ms.min(START_MAX) << LIMIT_BITS | fp
}

/// The closing word of process `pid` for the running word `running` (same limit).
pub(crate) fn closing(running: u64, pid: u32) -> u64 {
    CLOSING | (pid as u64) << LIMIT_BITS | running & LIMIT_MASK
}

pub(crate) fn read(word: u64) -> State {
    if word == 0 {
        State::NotStarted
    } else if word & CLOSING != 0 {
        State::Closing {
            pid: (word >> LIMIT_BITS) as u32,
        }
    } else {
        State::Running {
            start_ms: word >> LIMIT_BITS,
        }
    }
}

/// The limit a word holds, fractional (any form but 0).
pub(crate) fn limit(word: u64) -> f64 {
    (word & LIMIT_MASK) as f64 / LIMIT_ONE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_keeps_the_limit() {
        let running = pack_state(123_456, 7.5);
        assert_eq!(read(running), State::Running { start_ms: 123_456 });
        let claim = closing(running, 4_194_303);
        assert_eq!(read(claim), State::Closing { pid: 4_194_303 });
        assert_eq!((limit(running), limit(claim)), (7.5, 7.5));
        assert_eq!(read(0), State::NotStarted);
        assert_eq!(
            read(pack_state(u64::MAX, 1.0)),
            State::Running {
                start_ms: START_MAX
            },
            "a start never reads as a claim"
        );
        // What a reader of the earlier build takes for the start: 17 years away.
        assert!(claim >> LIMIT_BITS >= 1 << 39);
    }
}
