//! How the CLI writes numbers and tables for people: one duration, one size, one
//! time and one table formatter, so `weir status` and `weir checkpoints` read alike.

/// Milliseconds for people: `850 ms`, `12.3 s`, `4 min 5 s`, `2 h 10 min`.
pub(crate) fn duration_ms(ms: u64) -> String {
    match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, (ms / 1_000) % 60),
        _ => format!("{} h {} min", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

/// Fractional milliseconds for people: `0.4 ms`, `3.2 ms` below 10 ms, then as
/// [`duration_ms`].
pub(crate) fn duration_ms_fine(ms: f64) -> String {
    if ms < 10.0 {
        format!("{ms:.1} ms")
    } else {
        duration_ms(ms.round() as u64)
    }
}

/// Bytes for people, in powers of 1024: `512 B`, `1.5 KiB`, `98.3 MiB`.
pub(crate) fn bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Unix milliseconds as an ISO-8601 UTC time with milliseconds: `2026-01-01T00:00:00.000Z`.
pub(crate) fn format_utc(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rest) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        unix_ms % 1000
    )
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Milliseconds since the Unix epoch from 2000 up to 2100: a timestamp in this range reads as
/// a wall-clock time, one outside it (a record's index, a count of ms since the job began)
/// would read as a date that means nothing.
const WALL_CLOCK_MS: std::ops::Range<i64> = 946_684_800_000..4_102_444_800_000;

/// Whether a timestamp in ms is plausibly a wall-clock time (see [`WALL_CLOCK_MS`]).
pub(crate) fn looks_like_wall_clock(ms: i64) -> bool {
    WALL_CLOCK_MS.contains(&ms)
}

/// A timestamp in ms for people: the number, and after it the UTC time it names when it
/// [looks like a wall-clock time](looks_like_wall_clock):
/// `1764469922091 (2025-11-30T02:32:02.091Z)`, `48211`.
pub(crate) fn timestamp_ms(ms: i64) -> String {
    match u64::try_from(ms) {
        Ok(unix_ms) if looks_like_wall_clock(ms) => format!("{ms} ({})", format_utc(unix_ms)),
        _ => ms.to_string(),
    }
}

/// Rows as lines of columns padded to their widest cell, two spaces apart,
/// without trailing spaces. The first `left` columns are aligned left (text),
/// the others right (numbers); pass `usize::MAX` to align every column left.
pub(crate) fn table(rows: &[Vec<String>], left: usize) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(c, cell)| {
                    if c < left {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_and_sizes_read_as_people_write_them() {
        assert_eq!(duration_ms(12), "12 ms");
        assert_eq!(duration_ms(850), "850 ms");
        assert_eq!(duration_ms(12_345), "12.3 s");
        assert_eq!(duration_ms(125_000), "2 min 5 s");
        assert_eq!(duration_ms(245_000), "4 min 5 s");
        assert_eq!(duration_ms(7_800_000), "2 h 10 min");
        assert_eq!(duration_ms_fine(0.42), "0.4 ms");
        assert_eq!(duration_ms_fine(3.24), "3.2 ms");
        assert_eq!(duration_ms_fine(12.6), "13 ms");
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.0 MiB");
        assert_eq!(bytes(103_079_215), "98.3 MiB");
    }

    #[test]
    fn formats_utc_times_across_leap_years_and_month_ends() {
        assert_eq!(format_utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_utc(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(format_utc(1_767_225_599_999), "2025-12-31T23:59:59.999Z");
        assert_eq!(format_utc(1_767_225_600_012), "2026-01-01T00:00:00.012Z");
        assert_eq!(format_utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
    }

    #[test]
    fn timestamps_show_their_utc_time_when_they_look_like_wall_clock_ones() {
        assert_eq!(
            timestamp_ms(1_764_469_922_091),
            "1764469922091 (2025-11-30T02:32:02.091Z)"
        );
        assert_eq!(timestamp_ms(48_211), "48211");
        assert_eq!(timestamp_ms(-5), "-5");
        assert!(looks_like_wall_clock(946_684_800_000));
        assert!(!looks_like_wall_clock(946_684_799_999));
        assert!(!looks_like_wall_clock(4_102_444_800_000));
    }

    #[test]
    fn tables_align_text_left_and_numbers_right() {
        let rows: Vec<Vec<String>> = [["vertex", "tasks", "busy"], ["count", "12", "5%"]]
            .iter()
            .map(|row| row.iter().map(|cell| cell.to_string()).collect())
            .collect();
        assert_eq!(
            table(&rows, 1),
            ["vertex  tasks  busy", "count      12    5%"]
        );
        assert_eq!(
            table(&rows, usize::MAX),
            ["vertex  tasks  busy", "count   12     5%"]
        );
    }
}
