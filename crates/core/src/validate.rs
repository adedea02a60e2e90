//! Checks for numbers and names that arrive from PHP. Each error names the argument.

use crate::Error;
use std::time::Duration;

/// The longest name a funnel or budget may have, in bytes (it is stored in shared memory).
pub const MAX_NAME_LEN: usize = 64;

/// The longest duration we accept, in seconds (a year): larger values are typos and
/// would overflow nanosecond arithmetic.
pub const MAX_SECONDS: f64 = 31_536_000.0;
/// [`MAX_SECONDS`] as a duration: what a duration derived from settings is kept within.
pub const MAX_DURATION: Duration = Duration::from_secs(MAX_SECONDS as u64);

/// A number as an error message shows it: short in every case (`{}` spells out all 300 digits
/// of 1e300, and of 1e-300), so very large or very small ones in scientific notation.
pub fn shown(value: f64) -> String {
    let size = value.abs();
    if value.is_finite() && (size >= 1e9 || (size != 0.0 && size < 1e-6)) {
        format!("{value:e}")
    } else {
        format!("{value}")
    }
}

/// A duration that may be zero: finite, not negative, at most a year.
pub fn seconds(argument: &str, value: f64) -> Result<f64, Error> {
    if !value.is_finite() {
        return Err(Error::invalid_argument(
            argument,
            format!("must be a finite number of seconds, got {value}"),
        ));
    }
    if value < 0.0 {
        return Err(Error::invalid_argument(
            argument,
            format!("must not be negative, got {}", shown(value)),
        ));
    }
    if value > MAX_SECONDS {
        return Err(Error::invalid_argument(
            argument,
            format!(
                "must be at most {MAX_SECONDS} seconds, got {}",
                shown(value)
            ),
        ));
    }
    Ok(value)
}

/// The shortest timeout there is, in seconds: the client counts in milliseconds, and a smaller
/// number would fail every attempt at once, or mean "no timeout" to a client that rounds it to
/// 0 ms (curl).
pub const MIN_TIMEOUT_SECONDS: f64 = 0.001;

/// A timeout in seconds: finite, at least [`MIN_TIMEOUT_SECONDS`], at most a year.
pub fn timeout_seconds(argument: &str, value: f64) -> Result<f64, Error> {
    let value = seconds(argument, value)?;
    if value < MIN_TIMEOUT_SECONDS {
        return Err(Error::invalid_argument(
            argument,
            format!(
                "must be at least {MIN_TIMEOUT_SECONDS} seconds, got {}",
                shown(value)
            ),
        ));
    }
    Ok(value)
}

/// A duration given in seconds (a PHP float): finite, not negative, at most a year.
pub fn duration(argument: &str, seconds_value: f64) -> Result<Duration, Error> {
    let value = seconds(argument, seconds_value)?;
    if value > 0.0 && value < 1e-9 {
        // Positive, but under the nanosecond a Duration counts in (which rounds 5e-10 up to
        // it and less down to zero): not "zero" to the caller, and not what was asked.
        return Err(Error::invalid_argument(
            argument,
            format!("must be at least 1e-9 seconds, got {value:e}"),
        ));
    }
    Ok(Duration::from_secs_f64(value))
}

/// A duration that must be positive and at most a year; the rule [`duration`] values and the
/// typed configurations share.
pub fn positive_duration(argument: &str, value: Duration) -> Result<Duration, Error> {
    if value.is_zero() {
        return Err(Error::invalid_argument(
            argument,
            "must be greater than zero",
        ));
    }
    if value.as_secs_f64() > MAX_SECONDS {
        return Err(Error::invalid_argument(
            argument,
            format!(
                "must be at most {MAX_SECONDS} seconds, got {}",
                shown(value.as_secs_f64())
            ),
        ));
    }
    Ok(value)
}

/// A count given as a PHP int: not negative, and small enough for a `u32`.
pub fn unsigned(argument: &str, value: i64) -> Result<u32, Error> {
    u32::try_from(value).map_err(|_| {
        Error::invalid_argument(
            argument,
            if value < 0 {
                format!("must not be negative, got {value}")
            } else {
                format!("must be at most {}, got {value}", u32::MAX)
            },
        )
    })
}

/// A non-negative finite ratio.
pub fn ratio(argument: &str, value: f64) -> Result<f64, Error> {
    if !value.is_finite() || value < 0.0 {
        return Err(Error::invalid_argument(
            argument,
            format!("must be a finite number >= 0, got {}", shown(value)),
        ));
    }
    Ok(value)
}

/// An integer in `min..=max`.
pub fn count(argument: &str, value: i64, min: i64, max: i64) -> Result<u32, Error> {
    if value < min || value > max {
        return Err(Error::invalid_argument(
            argument,
            format!("must be between {min} and {max}, got {value}"),
        ));
    }
    Ok(value as u32)
}

/// A funnel or budget name: 1..=64 bytes, no NUL, no control characters.
pub fn name(argument: &str, value: &str) -> Result<(), Error> {
    if value.is_empty() {
        return Err(Error::invalid_argument(argument, "must not be empty"));
    }
    if value.len() > MAX_NAME_LEN {
        return Err(Error::invalid_argument(
            argument,
            format!(
                "is {} bytes long; at most {MAX_NAME_LEN} bytes are allowed",
                value.len()
            ),
        ));
    }
    if value.chars().any(char::is_control) {
        return Err(Error::invalid_argument(
            argument,
            "must not contain control characters",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_nan_inf_negative() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.5, 1e12] {
            let e = seconds("timeout", bad).unwrap_err();
            assert!(e.is_invalid_argument());
            assert_eq!(e.argument(), Some("timeout"));
            assert!(e.to_string().starts_with("timeout: "), "{e}");
        }
        assert_eq!(seconds("timeout", 0.0).unwrap(), 0.0);
        assert!(timeout_seconds("timeout", 0.0).is_err());
        for tiny in [5e-324, 1e-10, 0.000_999] {
            let e = timeout_seconds("timeout", tiny).unwrap_err().to_string();
            assert!(
                e.starts_with("timeout: must be at least 0.001 seconds, got "),
                "{e}"
            );
        }
        assert_eq!(timeout_seconds("timeout", 0.001).unwrap(), 0.001);
    }

    /// A positive duration under a nanosecond is refused as the message says ("at least
    /// 1e-9"), also 5e-10, which a `Duration` would round up to 1 ns.
    #[test]
    fn a_duration_under_a_nanosecond_is_refused() {
        for tiny in [5e-324, 1e-10, 5e-10, 9.99e-10] {
            let e = duration("lease", tiny).unwrap_err().to_string();
            assert!(
                e.starts_with("lease: must be at least 1e-9 seconds, got "),
                "{e}"
            );
        }
        assert_eq!(duration("lease", 1e-9).unwrap(), Duration::from_nanos(1));
        assert_eq!(duration("lease", 0.0).unwrap(), Duration::ZERO);
    }

    /// 1e300 was shown with all its 301 digits (a 348-byte message), 1e-320 likewise.
    #[test]
    fn very_large_and_very_small_numbers_are_shown_short() {
        let big = seconds("seconds", 1e300).unwrap_err().to_string();
        assert_eq!(big, "seconds: must be at most 31536000 seconds, got 1e300");
        let tiny = timeout_seconds("timeout", 1e-320).unwrap_err().to_string();
        assert_eq!(tiny, "timeout: must be at least 0.001 seconds, got 1e-320");
        let ratio = ratio("ratio", -1e200).unwrap_err().to_string();
        assert_eq!(ratio, "ratio: must be a finite number >= 0, got -1e200");
        assert_eq!(shown(0.0005), "0.0005");
        assert_eq!(shown(31_536_001.0), "31536001");
    }

    #[test]
    fn names() {
        assert!(name("name", "").is_err());
        assert!(name("name", &"x".repeat(65)).is_err());
        assert!(name("name", "a\0b").is_err());
        assert!(name("name", &"x".repeat(64)).is_ok());
        assert!(name("name", "shipping-quote").is_ok());
    }

    #[test]
    fn counts() {
        assert_eq!(count("limit", 3, 1, 64).unwrap(), 3);
        assert!(count("limit", 0, 1, 64).is_err());
        assert!(count("limit", 65, 1, 64).is_err());
    }
}
