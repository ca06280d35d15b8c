//! [`Mismatch`]: the first difference between two lists of records, shown the way an author
//! fixes it — the position, and both sides as the JSON lines they would read.
//!
//! Why only the first: operators are stateful, so one wrong record usually makes every later one
//! wrong too; the first difference is where to look, and a short message stays readable.

use std::fmt;

use super::json_record::JsonRecord;

/// Where two lists of records first differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The position of the first difference, from 0 (the record on line `index + 1` of the
    /// output).
    pub index: usize,
    /// What the reference side holds there; `None` when it has ended.
    pub expected: Option<JsonRecord>,
    /// What the side being checked holds there; `None` when it has ended.
    pub actual: Option<JsonRecord>,
    /// How many records the reference side has.
    pub expected_len: usize,
    /// How many records the side being checked has.
    pub actual_len: usize,
    /// What to call the reference side, e.g. `expected` or `without checkpoints`.
    pub expected_label: &'static str,
    /// What to call the side being checked, e.g. `actual` or `with checkpoints`.
    pub actual_label: &'static str,
}

impl Mismatch {
    /// The first difference between `expected` and `actual`, or `None` when they are equal.
    pub fn find(
        expected_label: &'static str,
        expected: &[JsonRecord],
        actual_label: &'static str,
        actual: &[JsonRecord],
    ) -> Option<Mismatch> {
        let index = expected
            .iter()
            .zip(actual)
            .position(|(e, a)| e != a)
            .or_else(|| {
                (expected.len() != actual.len()).then(|| expected.len().min(actual.len()))
            })?;
        Some(Mismatch {
            index,
            expected: expected.get(index).cloned(),
            actual: actual.get(index).cloned(),
            expected_len: expected.len(),
            actual_len: actual.len(),
            expected_label,
            actual_label,
        })
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let width = self.expected_label.len().max(self.actual_label.len()) + 1;
        let side = |record: &Option<JsonRecord>, len: usize| match record {
            Some(record) => record.to_json(),
            None => format!("(nothing: it ends after {})", records(len)),
        };
        writeln!(f, "first difference at record {}:", self.index + 1)?;
        writeln!(
            f,
            "  {:<width$} {}",
            format!("{}:", self.expected_label),
            side(&self.expected, self.expected_len)
        )?;
        writeln!(
            f,
            "  {:<width$} {}",
            format!("{}:", self.actual_label),
            side(&self.actual, self.actual_len)
        )?;
        write!(
            f,
            "({} has {}, {} has {})",
            self.expected_label,
            records(self.expected_len),
            self.actual_label,
            records(self.actual_len)
        )
    }
}

/// `1 record`, `2 records`.
pub(crate) fn records(n: usize) -> String {
    if n == 1 {
        "1 record".to_string()
    } else {
        format!("{n} records")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn value(v: &str) -> JsonRecord {
        JsonRecord {
            value: v.as_bytes().to_vec(),
            ..JsonRecord::default()
        }
    }

    #[test]
    fn equal_lists_have_no_mismatch() {
        let list = [value("a"), value("b")];
        assert_eq!(Mismatch::find("expected", &list, "actual", &list), None);
        assert_eq!(Mismatch::find("expected", &[], "actual", &[]), None);
    }

    #[test]
    fn finds_the_first_differing_record_and_shows_both_sides() {
        let expected = [value("a"), value("b"), value("c")];
        let actual = [value("a"), value("x"), value("c")];
        let m = Mismatch::find("expected", &expected, "actual", &actual).unwrap();
        assert_eq!(m.index, 1);
        assert_eq!(
            m.to_string(),
            "first difference at record 2:\n  \
             expected: {\"key\":\"\",\"value\":\"b\",\"timestamp\":0,\"port\":0}\n  \
             actual:   {\"key\":\"\",\"value\":\"x\",\"timestamp\":0,\"port\":0}\n\
             (expected has 3 records, actual has 3 records)"
        );
    }

    #[test]
    fn a_shorter_side_differs_where_it_ends() {
        let m = Mismatch::find(
            "expected",
            &[value("a")],
            "actual",
            &[value("a"), value("b")],
        )
        .unwrap();
        assert_eq!((m.index, m.expected.clone()), (1, None));
        assert!(
            m.to_string()
                .contains("expected: (nothing: it ends after 1 record)"),
            "{m}"
        );
    }
}
