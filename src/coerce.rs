//! PHP's coercive typing for values the binding receives as `mixed`: option array entries,
//! and constructor arguments taken as zvals so that `"4"` and `4.0` work as they do for PHP's
//! own functions (and for Guzzle's options; a Laravel config read from `.env` yields strings).
//!
//! Where a number is expected: ints, floats, and numeric strings (PHP 8's rule: optional
//! surrounding whitespace, a sign, digits, a fraction, an exponent) are accepted; an int must be
//! integral. Anything else is a `TypeError` in PHP's own words: `must be of type int, string
//! given`. Booleans are refused: `'limit' => true` is a mistake, not a number.
//!
//! Only the type is checked here; the value's rules (ranges, finiteness) belong to the crate
//! that uses it, so the same mistake reads the same through every path.

use std::fmt;

use ext_php_rs::exception::PhpException;
use ext_php_rs::types::Zval;

/// A value of the wrong type: `must be of type {expected}, {given} given`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TypeMismatch {
    pub expected: &'static str,
    pub given: String,
}

impl fmt::Display for TypeMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "must be of type {}, {} given", self.expected, self.given)
    }
}

impl TypeMismatch {
    fn new(expected: &'static str, value: &Zval) -> Self {
        TypeMismatch {
            expected,
            given: type_name(value),
        }
    }

    /// A `\TypeError` for a parameter, worded as PHP words its own:
    /// `Resilient\Funnel::__construct(): Argument #2 ($limit) must be of type int, string given`.
    pub fn for_argument(&self, function: &str, position: u32, name: &str) -> PhpException {
        type_error(format!(
            "{function}(): Argument #{position} (${name}) {self}"
        ))
    }

    /// A `\TypeError` for an option: `option 'funnel.limit' must be of type int, string given`.
    pub fn for_option(&self, path: &str) -> PhpException {
        type_error(format!("option '{path}' {self}"))
    }
}

/// An optional argument or option: `None` when absent or null (the default applies).
pub fn given(value: Option<&Zval>) -> Option<&Zval> {
    value.filter(|z| !z.dereference().is_null())
}

/// An int argument of `function`, coerced as PHP would (see the module docs).
pub fn int_arg(
    value: &Zval,
    function: &str,
    position: u32,
    name: &str,
) -> Result<i64, PhpException> {
    int(value).map_err(|e| e.for_argument(function, position, name))
}

/// An optional float argument of `function` (omitted or null: `None`), coerced as PHP would.
pub fn optional_float_arg(
    value: Option<&Zval>,
    function: &str,
    position: u32,
    name: &str,
) -> Result<Option<f64>, PhpException> {
    given(value)
        .map(|z| float_arg(z, function, position, name))
        .transpose()
}

/// A float argument of `function`, coerced as PHP would (see the module docs).
pub fn float_arg(
    value: &Zval,
    function: &str,
    position: u32,
    name: &str,
) -> Result<f64, PhpException> {
    float(value).map_err(|e| e.for_argument(function, position, name))
}

pub fn type_error(message: String) -> PhpException {
    PhpException::new(
        crate::exceptions::printable(crate::exceptions::about(message)),
        0,
        ext_php_rs::zend::ce::type_error(),
    )
}

/// PHP's name for a value's type, as in its `TypeError` messages.
pub fn type_name(value: &Zval) -> String {
    let value = value.dereference();
    if value.is_null() {
        "null".into()
    } else if value.is_bool() {
        "bool".into()
    } else if value.is_long() {
        "int".into()
    } else if value.is_double() {
        "float".into()
    } else if value.is_string() {
        "string".into()
    } else if value.is_array() {
        "array".into()
    } else if let Some(obj) = value.object() {
        // An anonymous class's name is `class@anonymous`, a NUL and where it was declared:
        // PHP's own messages stop at the NUL, and so do these.
        let name = obj.get_class_name().unwrap_or_else(|_| "object".into());
        match name.split_once('\0') {
            Some((shown, _)) => shown.into(),
            None => name,
        }
    } else if value.is_resource() {
        "resource".into()
    } else {
        "mixed".into()
    }
}

/// An int: an int, an integral float, or a numeric string with an integral value.
pub fn int(value: &Zval) -> Result<i64, TypeMismatch> {
    let value = value.dereference();
    let number = if value.is_long() {
        value.long().map(Number::Int)
    } else if value.is_double() {
        value.double().map(Number::Float)
    } else if value.is_string() {
        value.zend_str().and_then(|s| numeric(s.as_bytes()))
    } else {
        None
    };
    match number {
        Some(Number::Int(n)) => Ok(n),
        Some(Number::Float(f)) if integral(f) => Ok(f as i64),
        _ => Err(TypeMismatch::new("int", value)),
    }
}

/// A float: an int, a float, or a numeric string.
pub fn float(value: &Zval) -> Result<f64, TypeMismatch> {
    let value = value.dereference();
    if value.is_long() {
        return Ok(value.long().unwrap_or_default() as f64);
    }
    if value.is_double() {
        return Ok(value.double().unwrap_or_default());
    }
    if value.is_string() {
        if let Some(n) = value.zend_str().and_then(|s| numeric(s.as_bytes())) {
            return Ok(n.as_f64());
        }
    }
    Err(TypeMismatch::new("float", value))
}

fn integral(f: f64) -> bool {
    f.is_finite() && f.fract() == 0.0 && f >= i64::MIN as f64 && f < i64::MAX as f64
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Number {
    Int(i64),
    Float(f64),
}

impl Number {
    fn as_f64(self) -> f64 {
        match self {
            Number::Int(n) => n as f64,
            Number::Float(f) => f,
        }
    }
}

/// PHP 8's numeric strings: `[ws] [+-] (digits [. digits] | . digits) [(e|E) [+-] digits] [ws]`
/// (whitespace: space, \t, \n, \r, \v, \f). An integer form that fits in an i64 is an int.
fn numeric(bytes: &[u8]) -> Option<Number> {
    let is_ws = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = bytes.iter().position(|b| !is_ws(b))?;
    let end = bytes.iter().rposition(|b| !is_ws(b))? + 1;
    let s = std::str::from_utf8(&bytes[start..end]).ok()?;
    let body = s.strip_prefix(['+', '-']).unwrap_or(s);
    let (mantissa, exponent) = match body.find(['e', 'E']) {
        Some(i) => (&body[..i], Some(&body[i + 1..])),
        None => (body, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (mantissa, None),
    };
    let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = digits(whole)
        && fraction.is_none_or(digits)
        && !(whole.is_empty() && fraction.is_none_or(str::is_empty));
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['+', '-']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    if !mantissa_ok || !exponent_ok {
        return None;
    }
    if fraction.is_none() && exponent.is_none() {
        if let Ok(n) = s.parse::<i64>() {
            return Some(Number::Int(n));
        }
    }
    s.parse::<f64>().ok().map(Number::Float)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_strings_follow_php_8() {
        assert_eq!(numeric(b"4"), Some(Number::Int(4)));
        assert_eq!(numeric(b" 4 "), Some(Number::Int(4)));
        assert_eq!(numeric(b"-4"), Some(Number::Int(-4)));
        assert_eq!(numeric(b"4.0"), Some(Number::Float(4.0)));
        assert_eq!(numeric(b"0.5"), Some(Number::Float(0.5)));
        assert_eq!(numeric(b".5"), Some(Number::Float(0.5)));
        assert_eq!(numeric(b"5."), Some(Number::Float(5.0)));
        assert_eq!(numeric(b"1e3"), Some(Number::Float(1000.0)));
        assert_eq!(numeric(b"\t1E-1\n"), Some(Number::Float(0.1)));
        for bad in [
            &b""[..],
            b" ",
            b"abc",
            b"4abc",
            b"0x1A",
            b".",
            b"1e",
            b"e1",
            b"--1",
            b"1 2",
            b"\xff",
        ] {
            assert_eq!(numeric(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn the_message_is_phps() {
        let m = TypeMismatch {
            expected: "int",
            given: "string".into(),
        };
        assert_eq!(m.to_string(), "must be of type int, string given");
    }
}

/// Parameters declared `string`, `callable` or `bool` to PHP (reflection, stubs) but taken as
/// given, null included, so that a wrong value gets PHP's own wording, naming the method
/// (`Resilient\Client::get(): Argument #1 ($path) must be of type string, int given`), where
/// ext-php-rs's conversion would say only `Invalid value given for argument`. An optional one
/// is an `Option<…>` (`None` when omitted) read with its `optional` method (null: `None`).
macro_rules! declared_arg {
    ($(#[$doc:meta])* $name:ident, $type:ident) => {
        $(#[$doc])*
        pub struct $name<'a>(&'a Zval);

        impl<'a> ext_php_rs::convert::FromZval<'a> for $name<'a> {
            const TYPE: ext_php_rs::flags::DataType = ext_php_rs::flags::DataType::$type;

            fn from_zval(zval: &'a Zval) -> Option<Self> {
                Some($name(zval))
            }
        }

        #[allow(dead_code)]
        impl<'a> $name<'a> {
            /// The argument as `read` takes it (`None`: not of that type), or PHP's
            /// `\TypeError` saying it must be of type `expected`.
            fn read<T>(
                &self,
                expected: &'static str,
                function: &str,
                position: u32,
                name: &str,
                read: impl FnOnce(&'a Zval) -> Option<T>,
            ) -> Result<T, PhpException> {
                read(self.0).ok_or_else(|| {
                    TypeMismatch::new(expected, self.0).for_argument(function, position, name)
                })
            }

            /// As [`Self::read`] for an optional argument: omitted or null is `None`.
            fn read_optional<T>(
                arg: Option<&Self>,
                expected: &'static str,
                function: &str,
                position: u32,
                name: &str,
                read: impl FnOnce(&'a Zval) -> Option<T>,
            ) -> Result<Option<T>, PhpException> {
                match arg {
                    Some(arg) if !arg.0.dereference().is_null() => {
                        arg.read(expected, function, position, name, read).map(Some)
                    }
                    _ => Ok(None),
                }
            }
        }
    };
}

declared_arg!(
    /// A `string` parameter: [`StringArg::utf8`].
    StringArg,
    String
);
declared_arg!(
    /// A `callable` parameter: [`CallableArg::callable`], or [`CallableArg::optional`].
    CallableArg,
    Callable
);
declared_arg!(
    /// A `?bool` parameter: [`BoolArg::optional`].
    BoolArg,
    Bool
);

declared_arg!(
    /// An `array` parameter: [`ArrayArg::array`], or [`ArrayArg::optional`].
    ArrayArg,
    Array
);

impl<'a> ArrayArg<'a> {
    /// Argument `position` (`name`) of `function`, which must be an array.
    pub fn array(
        &self,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<&'a ext_php_rs::types::ZendHashTable, PhpException> {
        self.read("array", function, position, name, |z| {
            z.dereference().array()
        })
    }

    /// An optional `?array` argument (null: `None`).
    pub fn optional(
        arg: Option<&Self>,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<Option<&'a ext_php_rs::types::ZendHashTable>, PhpException> {
        Self::read_optional(arg, "?array", function, position, name, |z| {
            z.dereference().array()
        })
    }
}

impl StringArg<'_> {
    /// As [`StringArg::utf8`], also taking an int as its decimal text: for a name that comes
    /// back as an array key (PHP makes the key `'404'` the int `404`), such as
    /// `Metrics::snapshot()`'s.
    pub fn utf8_or_key(
        &self,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<String, PhpException> {
        match self.0.long() {
            Some(n) => Ok(n.to_string()),
            None => self.utf8(function, position, name),
        }
    }

    /// An optional `?string` argument taken as an array key: null is `None`, an int its
    /// decimal text.
    pub fn optional_key(
        arg: Option<&Self>,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<Option<String>, PhpException> {
        match arg {
            Some(arg) if !arg.0.dereference().is_null() => {
                arg.utf8_or_key(function, position, name).map(Some)
            }
            _ => Ok(None),
        }
    }

    /// Argument `position` (`name`) of `function`, which must be UTF-8 text (`\ValueError`
    /// otherwise).
    pub fn utf8(&self, function: &str, position: u32, name: &str) -> Result<String, PhpException> {
        let text = self.read("string", function, position, name, |z| {
            z.dereference().zend_str()
        })?;
        String::from_utf8(text.as_bytes().to_vec()).map_err(|_| {
            crate::exceptions::value_error(format!(
                "{function}(): Argument #{position} (${name}) is not valid UTF-8"
            ))
        })
    }
}

impl<'a> CallableArg<'a> {
    /// Argument `position` (`name`) of `function`.
    pub fn callable(
        &self,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<ext_php_rs::types::ZendCallable<'a>, PhpException> {
        self.read("callable", function, position, name, |z| {
            ext_php_rs::types::ZendCallable::new(z).ok()
        })
    }

    /// An optional `?callable` argument (null: `None`).
    pub fn optional(
        arg: Option<&Self>,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<Option<ext_php_rs::types::ZendCallable<'a>>, PhpException> {
        Self::read_optional(arg, "?callable", function, position, name, |z| {
            ext_php_rs::types::ZendCallable::new(z).ok()
        })
    }
}

impl BoolArg<'_> {
    /// An optional `?bool` argument (null: `None`).
    pub fn optional(
        arg: Option<&Self>,
        function: &str,
        position: u32,
        name: &str,
    ) -> Result<Option<bool>, PhpException> {
        Self::read_optional(arg, "?bool", function, position, name, |z| {
            z.dereference().bool()
        })
    }
}
