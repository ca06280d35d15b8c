//! Durations and sizes as job files write them: an integer immediately
//! followed by a unit, such as `"500ms"` or `"256MiB"`.
//!
//! Parsing returns a [`UnitError`] on malformed text and on a value too large for
//! the 64-bit integer it is counted in; the caller knows the key and the line and
//! builds the error (see [`DURATION_FORMS`] and [`SIZE_FORMS`]).

use std::time::Duration;

/// What a duration may look like, for error messages.
pub const DURATION_FORMS: &str =
    "an integer and a unit: ms, s, m or h (e.g. \"500ms\", \"5s\", \"2m\", \"1h\")";

/// What a size may look like, for error messages.
pub const SIZE_FORMS: &str = "an integer and a unit: B, KiB, MiB, GiB (1024-based) \
     or KB, MB, GB (1000-based) (e.g. \"64KiB\", \"256MiB\", \"1GB\")";

/// Why a duration or a size could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitError {
    /// Not an integer immediately followed by a known unit.
    Malformed,
    /// Well-formed, but more than a `u64` of milliseconds or bytes.
    Overflow,
}

/// Splits `"250ms"` into its digits and its unit; `None` without leading digits.
fn split_number(text: &str) -> Option<(&str, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    (digits > 0).then(|| text.split_at(digits))
}

/// `digits × per_unit`, or [`UnitError::Overflow`].
fn scaled(digits: &str, per_unit: u64) -> Result<u64, UnitError> {
    // Only digits: parsing can fail by overflow alone.
    let value = digits.parse::<u64>().map_err(|_| UnitError::Overflow)?;
    value.checked_mul(per_unit).ok_or(UnitError::Overflow)
}

/// Parses `"<integer><unit>"` with unit `ms`, `s`, `m` (minutes) or `h`.
///
/// No spaces, signs, fractions or other units ([`UnitError::Malformed`]); more than
/// `u64::MAX` milliseconds is [`UnitError::Overflow`].
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let (digits, unit) = split_number(text).ok_or(UnitError::Malformed)?;
    let millis_per_unit: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(UnitError::Malformed),
    };
    scaled(digits, millis_per_unit).map(Duration::from_millis)
}

/// Writes `duration` in the largest unit that represents it exactly.
///
/// Sub-millisecond parts, which a job file cannot express, are dropped.
pub fn format_duration(duration: Duration) -> String {
    let millis = duration.as_millis();
    for (unit, per) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if millis != 0 && millis.is_multiple_of(per) {
            return format!("{}{unit}", millis / per);
        }
    }
    format!("{millis}ms")
}

/// Parses `"<integer><unit>"` with unit `B`, `KiB`, `MiB`, `GiB`, `KB`, `MB` or `GB`
/// into bytes: [`UnitError::Malformed`] if malformed, [`UnitError::Overflow`] beyond a `u64`.
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let (digits, unit) = split_number(text).ok_or(UnitError::Malformed)?;
    let bytes_per_unit: u64 = match unit {
        "B" => 1,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        "KB" => 1_000,
        "MB" => 1_000_000,
        "GB" => 1_000_000_000,
        _ => return Err(UnitError::Malformed),
    };
    scaled(digits, bytes_per_unit)
}

/// Writes `bytes` in the largest unit that represents it exactly, 1024-based
/// units first (`"256MiB"`, then `"8MB"`, else `"1500B"`).
pub fn format_size(bytes: u64) -> String {
    let units = [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("GB", 1_000_000_000),
        ("MB", 1_000_000),
        ("KB", 1_000),
    ];
    for (unit, per) in units {
        if bytes != 0 && bytes.is_multiple_of(per) {
            return format!("{}{unit}", bytes / per);
        }
    }
    format!("{bytes}B")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_duration_unit() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_malformed_durations() {
        for text in [
            "",
            "5",
            "s",
            "5 s",
            " 5s",
            "5s ",
            "-5s",
            "+5s",
            "1.5s",
            "5sec",
            "5S",
            "5min",
            "5us",
            "99999999999999999999xs",
        ] {
            assert_eq!(parse_duration(text), Err(UnitError::Malformed), "{text:?}");
        }
    }

    #[test]
    fn durations_beyond_a_u64_of_milliseconds_overflow() {
        for text in [
            "18446744073709551615h",
            "9999999999999h",
            "99999999999999999999ms",
        ] {
            assert_eq!(parse_duration(text), Err(UnitError::Overflow), "{text:?}");
        }
        assert_eq!(
            parse_duration("18446744073709551615ms"),
            Ok(Duration::from_millis(u64::MAX))
        );
        assert_eq!(
            parse_size("99999999999999999999B"),
            Err(UnitError::Overflow)
        );
    }

    #[test]
    fn formats_durations_in_the_largest_exact_unit() {
        assert_eq!(format_duration(Duration::from_millis(1500)), "1500ms");
        assert_eq!(format_duration(Duration::from_secs(60)), "1m");
        assert_eq!(format_duration(Duration::from_secs(7200)), "2h");
        assert_eq!(format_duration(Duration::from_secs(90)), "90s");
        assert_eq!(format_duration(Duration::ZERO), "0ms");
        for text in ["1500ms", "1m", "2h", "90s", "0ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }

    #[test]
    fn parses_every_size_unit() {
        assert_eq!(parse_size("17B"), Ok(17));
        assert_eq!(parse_size("64KiB"), Ok(64 * 1024));
        assert_eq!(parse_size("256MiB"), Ok(256 << 20));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert_eq!(parse_size("2KB"), Ok(2_000));
        assert_eq!(parse_size("3MB"), Ok(3_000_000));
        assert_eq!(parse_size("4GB"), Ok(4_000_000_000));
    }

    #[test]
    fn rejects_malformed_sizes() {
        for text in [
            "", "256", "MiB", "256 MiB", "256mib", "256kb", "1.5GiB", "1TiB", "-1B",
        ] {
            assert_eq!(parse_size(text), Err(UnitError::Malformed), "{text:?}");
        }
        assert_eq!(
            parse_size("18446744073709551615GiB"),
            Err(UnitError::Overflow)
        );
    }

    #[test]
    fn formats_sizes_in_the_largest_exact_unit() {
        assert_eq!(format_size(256 << 20), "256MiB");
        assert_eq!(format_size(1 << 30), "1GiB");
        assert_eq!(format_size(1_000), "1KB");
        assert_eq!(format_size(8_000_000), "8MB");
        assert_eq!(format_size(1_500), "1500B");
        assert_eq!(format_size(0), "0B");
    }
}
