//! `split`: breaks lines of text into words.
//!
//! Each input record's value is a line of text. For every word in it the operator emits one
//! record whose key and value are both the word, with the input record's timestamp. Words are
//! what lies between Unicode whitespace, with ASCII punctuation stripped from both ends and then
//! lowercased character by character (`char::to_lowercase`); words left empty are skipped. So
//! `"Hello, hello world!"` gives `hello`, `hello`, `world`.
//!
//! Invalid UTF-8 in a line is read as U+FFFD rather than failing the job.
//!
//! The operator is stateless: its snapshot is empty. Keying the output by word lets a
//! downstream `count` operator, behind a `key-hash` edge, count words.

use serde::{Deserialize, Serialize};
use weir_sdk::{Batch, Context, Operator, Output, Result};

/// The `split` operator. Holds no state, so its snapshot is zero bytes.
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Split;

impl Operator for Split {
    fn init(_ctx: &Context) -> Result<Self> {
        Ok(Split)
    }

    fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
        // One buffer for the lowercased word, reused for every word of the batch.
        let mut word = String::new();
        for record in input {
            let line = String::from_utf8_lossy(record.value);
            for raw in line.split_whitespace() {
                let trimmed = raw.trim_matches(|c: char| c.is_ascii_punctuation());
                if trimmed.is_empty() {
                    continue;
                }
                word.clear();
                word.extend(trimmed.chars().flat_map(char::to_lowercase));
                out.emit(word.as_bytes(), word.as_bytes(), record.timestamp);
            }
        }
        Ok(())
    }
}

weir_sdk::export!(Split);

#[cfg(test)]
mod tests {
    use weir_sdk::testing::{Harness, assert_records_eq, assert_restore_preserves_output, record};

    use super::*;

    fn split(line: &[u8]) -> Vec<String> {
        let mut harness = Harness::<Split>::new(Context::new("split")).unwrap();
        let out = harness.push("", line, 0).unwrap();
        out.iter()
            .map(|r| {
                assert_eq!(r.key, r.value);
                String::from_utf8(r.value.clone()).unwrap()
            })
            .collect()
    }

    #[test]
    fn emits_one_record_per_word_keyed_by_the_word() -> Result<()> {
        let mut harness = Harness::<Split>::new(Context::new("split"))?;
        let out = harness.push("line-1", "Hello, hello world!", 42)?;
        assert_records_eq(
            &out,
            &[
                record("hello", "hello", 42),
                record("hello", "hello", 42),
                record("world", "world", 42),
            ],
        );
        Ok(())
    }

    #[test]
    fn splits_on_unicode_whitespace_and_strips_only_ascii_punctuation_at_the_ends() {
        assert_eq!(
            split("a\tb\u{3000}c\u{a0}d\n".as_bytes()),
            ["a", "b", "c", "d"]
        );
        assert_eq!(
            split(b"(don't) -- e-mail... \"Quoted\""),
            ["don't", "e-mail", "quoted"]
        );
        assert_eq!(split("«Größe» ÉTÉ".as_bytes()), ["«größe»", "été"]);
    }

    #[test]
    fn skips_empty_lines_and_punctuation_only_words() {
        assert!(split(b"").is_empty());
        assert!(split(b"  ... !? --  ").is_empty());
    }

    #[test]
    fn reads_invalid_utf8_as_replacement_characters() {
        assert_eq!(split(b"ok \xff\xfe bad"), ["ok", "\u{fffd}\u{fffd}", "bad"]);
    }

    #[test]
    fn snapshot_is_empty_and_restoring_changes_nothing() -> Result<()> {
        let harness = Harness::<Split>::new(Context::new("split"))?;
        assert!(harness.snapshot()?.is_empty());
        let input = [
            record("", "The quick brown fox", 1),
            record("", "", 2),
            record("", "jumps over the lazy dog.", 3),
            record("", "THE END", 4),
        ];
        assert_restore_preserves_output::<Split>(&Context::new("split"), &input, 1);
        Ok(())
    }
}
