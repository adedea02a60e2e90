//! The core's error: opaque, with predicates (as hyper's), and a message that names the
//! argument or the file and says what is wrong.

use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    InvalidArgument,
    Segment,
    TableFull,
    TooDeep,
}

/// What went wrong in the core. Bindings map it to PHP exceptions by predicate.
#[derive(Debug, Clone)]
pub struct Error {
    kind: Kind,
    argument: Option<String>,
    message: String,
}

impl Error {
    /// A caller-supplied value is wrong; `argument` names it.
    pub fn invalid_argument(argument: impl Into<String>, message: impl Into<String>) -> Self {
        let argument = argument.into();
        Error {
            kind: Kind::InvalidArgument,
            message: format!("{argument}: {}", message.into()),
            argument: Some(argument),
        }
    }

    /// The shared-memory file cannot be used; the message names the path.
    pub fn segment(path: &std::path::Path, message: impl fmt::Display) -> Self {
        Error {
            kind: Kind::Segment,
            argument: None,
            message: format!("shared memory segment {}: {message}", path.display()),
        }
    }

    pub(crate) fn table_full(path: &std::path::Path, slots: u32) -> Self {
        Error {
            kind: Kind::TableFull,
            argument: None,
            message: format!(
                "shared memory segment {}: its table is full (all {slots} entries are in use: \
                 one per funnel or client name, one per retry budget and window, and one per \
                 circuit breaker and window); \
                 a file keeps the count it was made with, so raise resilient.shm_slots, then \
                 remove the file after stopping PHP",
                path.display()
            ),
        }
    }

    /// `what` was nested deeper than its limit (runaway recursion).
    pub fn too_deep(what: &str, message: impl fmt::Display) -> Self {
        Error {
            kind: Kind::TooDeep,
            argument: None,
            message: format!("{what}: {message}"),
        }
    }

    /// Nesting beyond a limit (e.g. [`crate::deadline::MAX_DEPTH`]).
    pub fn is_too_deep(&self) -> bool {
        self.kind == Kind::TooDeep
    }

    pub fn is_invalid_argument(&self) -> bool {
        self.kind == Kind::InvalidArgument
    }

    /// The segment file is missing, foreign, corrupt, or cannot be mapped.
    pub fn is_segment(&self) -> bool {
        self.kind == Kind::Segment || self.kind == Kind::TableFull
    }

    pub fn is_table_full(&self) -> bool {
        self.kind == Kind::TableFull
    }

    /// The argument an invalid-argument error is about.
    pub fn argument(&self) -> Option<&str> {
        self.argument.as_deref()
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}
