//! [`ConfigError`]: a bad option or argument, naming the option. Apart from the call errors so
//! that parsing options depends on nothing else of the crate.

use std::fmt;

/// A bad option or argument. `Display`: `option 'timeout': must be ...`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    option: String,
    problem: String,
}

impl ConfigError {
    pub fn new(option: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            option: option.into(),
            problem: problem.into(),
        }
    }
    /// The option's path, e.g. `backoff.base`, `headers.X-Api-Key`, `url`.
    pub fn option(&self) -> &str {
        &self.option
    }
    pub fn problem(&self) -> &str {
        &self.problem
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "option '{}': {}", self.option, self.problem)
    }
}

impl std::error::Error for ConfigError {}
