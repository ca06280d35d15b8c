//! The one error type of the SDK.
//!
//! Whatever goes wrong in a guest ends up as a message handed to the host's `fail` import, so an
//! error here is just that message. Any `std::error::Error` converts into it, which lets operator
//! code use `?` on parse errors, I/O-style writes and the like.

use core::fmt;

/// An operator failure: a message for the job's log.
///
/// Returning it from an [`Operator`](crate::Operator) method fails the call; in wasm the host
/// reports the message, naming the operator and subtask. `Error` deliberately does not implement
/// `std::error::Error` itself, so that every type that does can convert into it with `?`.
pub struct Error {
    message: String,
}

/// The result of an operator call.
pub type Result<T> = core::result::Result<T, Error>;

impl Error {
    /// An error carrying `message`.
    pub fn msg(message: impl fmt::Display) -> Self {
        Error {
            message: message.to_string(),
        }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl<E: std::error::Error> From<E> for Error {
    fn from(error: E) -> Self {
        Error::msg(error)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Shows the bare message, so a test returning `Result` fails with readable text.
impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Returns early with an [`Error`] built from a format string.
///
/// ```
/// fn parse_limit(config: &str) -> weir_sdk::Result<u32> {
///     match config.trim().parse() {
///         Ok(limit) if limit > 0 => Ok(limit),
///         _ => weir_sdk::bail!("config `{config}` is not a positive number: write e.g. `100`"),
///     }
/// }
/// assert_eq!(parse_limit("7").unwrap(), 7);
/// assert!(parse_limit("0").is_err());
/// ```
#[macro_export]
macro_rules! bail {
    ($($arg:tt)*) => {
        return ::core::result::Result::Err($crate::Error::msg(::std::format!($($arg)*)))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converts_std_errors_with_question_mark() {
        fn parse(text: &str) -> Result<u64> {
            Ok(text.parse::<u64>()?)
        }
        assert_eq!(parse("12").unwrap(), 12);
        assert_eq!(
            parse("x").unwrap_err().message(),
            "invalid digit found in string"
        );
    }

    #[test]
    fn debug_is_the_bare_message() {
        assert_eq!(format!("{:?}", Error::msg("boom at 3")), "boom at 3");
    }
}
