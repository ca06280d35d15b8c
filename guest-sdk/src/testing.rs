//! Testing operators natively, through the same codec path as the wasm build.
//!
//! [`Harness`] drives one operator instance the way the host does: the [`Context`] is encoded
//! into an init message and decoded again, every input is encoded with `BatchBuilder` and decoded
//! with `Batch::decode`, and output is collected in the batches the guest would hand to `emit`,
//! then decoded into [`OwnedRecord`]s. Only the pointer code of the wasm build is left out.
//!
//! [`assert_records_eq`] compares outputs with a readable diff, and
//! [`assert_restore_preserves_output`] checks that checkpointing an operator does not change
//! what it emits.

use core::fmt;
use std::fmt::Write as _;

use weir_abi::{Batch, BatchBuilder, Record};

use crate::output::{Output, Sink};
use crate::{Context, Error, Operator, Result, State, dispatch};

/// A record that owns its bytes, for building test input and comparing output.
///
/// Its `Debug` output shows keys and values as text when they are printable UTF-8, in hex
/// (`0x…`) otherwise.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OwnedRecord {
    /// The key; empty when the record has none.
    pub key: Vec<u8>,
    /// The value.
    pub value: Vec<u8>,
    /// Event time in milliseconds.
    pub timestamp: i64,
}

impl OwnedRecord {
    /// A record with copies of `key` and `value`.
    pub fn new(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, timestamp: i64) -> Self {
        OwnedRecord {
            key: key.as_ref().to_vec(),
            value: value.as_ref().to_vec(),
            timestamp,
        }
    }

    /// The record borrowed as the ABI's [`Record`].
    pub fn as_record(&self) -> Record<'_> {
        Record {
            key: &self.key,
            value: &self.value,
            timestamp: self.timestamp,
        }
    }
}

/// Shorthand for [`OwnedRecord::new`]: `record("word", "1", 5)`.
pub fn record(key: impl AsRef<[u8]>, value: impl AsRef<[u8]>, timestamp: i64) -> OwnedRecord {
    OwnedRecord::new(key, value, timestamp)
}

impl From<Record<'_>> for OwnedRecord {
    fn from(record: Record<'_>) -> Self {
        OwnedRecord::new(record.key, record.value, record.timestamp)
    }
}

impl fmt::Debug for OwnedRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedRecord")
            .field("key", &Bytes(&self.key))
            .field("value", &Bytes(&self.value))
            .field("timestamp", &self.timestamp)
            .finish()
    }
}

/// Bytes shown as a quoted string when printable UTF-8, as hex otherwise.
struct Bytes<'a>(&'a [u8]);

impl fmt::Debug for Bytes<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match core::str::from_utf8(self.0) {
            Ok(text) if !text.chars().any(char::is_control) => write!(f, "{text:?}"),
            _ => {
                f.write_str("0x")?;
                self.0.iter().try_for_each(|byte| write!(f, "{byte:02x}"))
            }
        }
    }
}

/// One operator instance, driven natively the way the host drives a guest.
///
/// Every method returns the operator's error if it fails, so a test can return
/// [`weir_sdk::Result`](crate::Result) and use `?`, or check the error.
pub struct Harness<T> {
    /// The context the instance was created with; fresh instances get it too.
    context: Context,
    /// The instance under test.
    operator: T,
    /// Collects the batches the instance emits during a call.
    output: Output,
}

impl<T: Operator + State> Harness<T> {
    /// Creates an instance from `context`, through an encoded init message.
    pub fn new(context: Context) -> Result<Self> {
        let operator = dispatch::init::<T>(&context.encode_init())?;
        Ok(Harness {
            context,
            operator,
            output: Output::new(Sink::Keep(Vec::new())),
        })
    }

    /// The context the instance was created with.
    pub fn context(&self) -> &Context {
        &self.context
    }

    /// The instance under test, to inspect its fields.
    pub fn operator(&self) -> &T {
        &self.operator
    }

    /// Processes a batch of one record on port 0 and returns what the operator emitted.
    pub fn push(
        &mut self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        timestamp: i64,
    ) -> Result<Vec<OwnedRecord>> {
        let mut batch = BatchBuilder::new(0);
        batch.push(key.as_ref(), value.as_ref(), timestamp);
        self.push_batch(batch.as_bytes())
    }

    /// Processes one batch of `records` arriving on input `port` and returns what the operator
    /// emitted.
    pub fn push_on(&mut self, port: u32, records: &[OwnedRecord]) -> Result<Vec<OwnedRecord>> {
        let mut batch = BatchBuilder::new(port);
        for record in records {
            batch.push_record(&record.as_record());
        }
        self.push_batch(batch.as_bytes())
    }

    /// Processes an encoded batch, as the host passes it to `weir_process`, and returns what
    /// the operator emitted. Malformed bytes fail as they would in wasm.
    pub fn push_batch(&mut self, batch: &[u8]) -> Result<Vec<OwnedRecord>> {
        dispatch::process(&mut self.operator, batch, &mut self.output)?;
        self.take_emitted()
    }

    /// Processes an encoded batch and returns the encoded batches the operator emitted, as the
    /// host receives them from `emit`: no decoding, no check. For benchmarks that compare an
    /// operator compiled natively with its wasm build doing the same work; tests want
    /// [`push_batch`](Self::push_batch).
    pub fn push_batch_encoded(&mut self, batch: &[u8]) -> Result<Vec<Vec<u8>>> {
        dispatch::process(&mut self.operator, batch, &mut self.output)?;
        Ok(self.output.take_kept())
    }

    /// Tells the operator that every input ended and returns what it emitted.
    pub fn finish(&mut self) -> Result<Vec<OwnedRecord>> {
        dispatch::finish(&mut self.operator, &mut self.output)?;
        self.take_emitted()
    }

    /// Tells the operator that checkpoints up to `checkpoint_id` are durable.
    pub fn checkpoint_complete(&mut self, checkpoint_id: u64) -> Result<()> {
        self.operator.checkpoint_complete(checkpoint_id)
    }

    /// The operator's state, as the host would store it.
    pub fn snapshot(&self) -> Result<Vec<u8>> {
        self.operator.snapshot()
    }

    /// Replaces the instance by a fresh one, created with the same context and then restored
    /// from `snapshot` — what a job restart does.
    pub fn restore_into_fresh(&mut self, snapshot: &[u8]) -> Result<()> {
        let mut fresh = dispatch::init::<T>(&self.context.encode_init())?;
        fresh.restore(snapshot)?;
        self.operator = fresh;
        Ok(())
    }

    /// Snapshots the instance and replaces it by a fresh one restored from the snapshot.
    pub fn snapshot_and_restore(&mut self) -> Result<()> {
        let snapshot = self.snapshot()?;
        self.restore_into_fresh(&snapshot)
    }

    /// Decodes the batches emitted during the last call, checking them as the host would.
    fn take_emitted(&mut self) -> Result<Vec<OwnedRecord>> {
        let mut records = Vec::new();
        for bytes in self.output.take_kept() {
            let batch = Batch::decode(&bytes)
                .map_err(|e| Error::msg(format!("the operator emitted a malformed batch: {e}")))?;
            if batch.port() != 0 {
                return Err(Error::msg(
                    "the operator emitted a batch whose port is not 0",
                ));
            }
            records.extend(batch.iter().map(OwnedRecord::from));
        }
        Ok(records)
    }
}

/// Asserts that two record lists are equal; otherwise panics showing the first index at which
/// they differ, the two records there, and both lists.
#[track_caller]
pub fn assert_records_eq(actual: &[OwnedRecord], expected: &[OwnedRecord]) {
    if let Some(diff) = diff(("actual", actual), ("expected", expected)) {
        panic!("{diff}");
    }
}

/// Asserts that snapshotting an operator and restoring it into a fresh instance does not change
/// its output.
///
/// Runs `input` through a new instance one record per batch, then calls `finish`. Runs it again
/// through another instance, this time replacing the instance by a fresh one restored from its
/// snapshot after every `every`-th record. Panics with a diff if the two outputs differ, or if
/// the operator fails. `checkpoint_complete` is not called in either run.
#[track_caller]
pub fn assert_restore_preserves_output<T: Operator + State>(
    context: &Context,
    input: &[OwnedRecord],
    every: usize,
) {
    assert!(
        every > 0,
        "restore after every 0 records: `every` must be at least 1"
    );
    let straight = match run::<T>(context, input, None) {
        Ok(output) => output,
        Err(e) => panic!("the run without restores failed: {e}"),
    };
    let restored = match run::<T>(context, input, Some(every)) {
        Ok(output) => output,
        Err(e) => panic!("the run restoring after every {every} record(s) failed: {e}"),
    };
    if let Some(diff) = diff(("with restores", &restored), ("without", &straight)) {
        panic!(
            "output changes when the operator is restored into a fresh instance after every \
             {every} record(s)\n{diff}"
        );
    }
}

/// Runs `input` through a new instance, one record per batch, restoring it after every `every`
/// records when asked to, then finishes; returns everything emitted.
fn run<T: Operator + State>(
    context: &Context,
    input: &[OwnedRecord],
    restore_every: Option<usize>,
) -> Result<Vec<OwnedRecord>> {
    let mut harness = Harness::<T>::new(context.clone())?;
    let mut output = Vec::new();
    for (index, record) in input.iter().enumerate() {
        output.extend(harness.push_on(0, core::slice::from_ref(record))?);
        if restore_every.is_some_and(|every| (index + 1) % every == 0) {
            harness.snapshot_and_restore()?;
        }
    }
    output.extend(harness.finish()?);
    Ok(output)
}

/// Most records of each side a diff lists.
const DIFF_LISTED: usize = 50;

/// Describes how `left` and `right` differ, or `None` if they are equal.
fn diff(
    (left_name, left): (&str, &[OwnedRecord]),
    (right_name, right): (&str, &[OwnedRecord]),
) -> Option<String> {
    let index = (0..left.len().max(right.len())).find(|&i| left.get(i) != right.get(i))?;
    let width = left_name.len().max(right_name.len()) + 1;
    let mut text = format!(
        "records differ at index {index} ({left_name}: {} records, {right_name}: {})\n",
        left.len(),
        right.len()
    );
    for (name, records) in [(left_name, left), (right_name, right)] {
        let at = match records.get(index) {
            Some(record) => format!("{record:?}"),
            None => "(no record)".to_owned(),
        };
        let _ = writeln!(text, "  {:width$} {at}", format!("{name}:"));
    }
    for (name, records) in [(left_name, left), (right_name, right)] {
        let _ = writeln!(text, "{name}:");
        for (i, record) in records.iter().enumerate().take(DIFF_LISTED) {
            let marker = if i == index { '>' } else { ' ' };
            let _ = writeln!(text, " {marker}{i:4}: {record:?}");
        }
        if records.len() > DIFF_LISTED {
            let _ = writeln!(text, "   … {} more", records.len() - DIFF_LISTED);
        }
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    use serde::{Deserialize, Serialize};

    use super::*;
    use crate::{Batch, bail};

    /// Emits each value with a running total of value lengths; fails on the value "boom".
    #[derive(Serialize, Deserialize)]
    struct Total {
        bytes: u64,
        port_seen: Option<u32>,
    }

    impl Operator for Total {
        fn init(ctx: &Context) -> Result<Self> {
            if ctx.config_str()? == "refuse" {
                bail!("operator `{}` refuses to start", ctx.operator());
            }
            Ok(Total {
                bytes: 0,
                port_seen: None,
            })
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            self.port_seen = Some(input.port());
            for record in input {
                out.emit(record.key, b"partial", record.timestamp);
                if record.value == b"boom" {
                    bail!("boom at {}", record.timestamp);
                }
                self.bytes += record.value.len() as u64;
                out.emit(
                    record.key,
                    self.bytes.to_string().as_bytes(),
                    record.timestamp,
                );
            }
            Ok(())
        }

        fn finish(&mut self, out: &mut Output) -> Result<()> {
            out.emit(b"total", self.bytes.to_string().as_bytes(), i64::MAX);
            Ok(())
        }
    }

    /// Forgets its state on restore: what `assert_restore_preserves_output` must catch.
    #[derive(Default)]
    struct Forgetful {
        seen: u64,
    }

    impl Operator for Forgetful {
        fn init(_ctx: &Context) -> Result<Self> {
            Ok(Forgetful::default())
        }

        fn process(&mut self, input: &Batch<'_>, out: &mut Output) -> Result<()> {
            for record in input {
                self.seen += 1;
                out.emit(
                    record.key,
                    self.seen.to_string().as_bytes(),
                    record.timestamp,
                );
            }
            Ok(())
        }
    }

    impl State for Forgetful {
        fn snapshot(&self) -> Result<Vec<u8>> {
            Ok(Vec::new())
        }

        fn restore(&mut self, _bytes: &[u8]) -> Result<()> {
            Ok(())
        }
    }

    fn harness() -> Harness<Total> {
        Harness::new(Context::new("total")).unwrap()
    }

    #[test]
    fn returns_what_each_call_emits() -> Result<()> {
        let mut h = harness();
        let out = h.push("a", "xyz", 1)?;
        assert_records_eq(&out, &[record("a", "partial", 1), record("a", "3", 1)]);
        let out = h.push_on(2, &[record("b", "", 2), record("c", "12", 3)])?;
        assert_eq!(out.len(), 4);
        assert_eq!(h.operator().port_seen, Some(2));
        assert_records_eq(&h.finish()?, &[record("total", "5", i64::MAX)]);
        Ok(())
    }

    #[test]
    fn drops_the_output_of_a_failed_call() {
        let mut h = harness();
        let err = h
            .push_on(0, &[record("a", "x", 1), record("a", "boom", 2)])
            .unwrap_err();
        assert_eq!(err.message(), "boom at 2");
        assert_records_eq(
            &h.push("a", "y", 3).unwrap(),
            &[record("a", "partial", 3), record("a", "2", 3)],
        );
    }

    #[test]
    fn init_errors_and_bad_contexts_surface_from_new() {
        let refused = Harness::<Total>::new(Context::new("t").with_config("refuse"));
        assert_eq!(
            refused.err().unwrap().message(),
            "operator `t` refuses to start"
        );
        let bad = Harness::<Total>::new(Context::new("t").with_subtask(3, 3));
        assert!(
            bad.err()
                .unwrap()
                .message()
                .starts_with("malformed init message")
        );
    }

    #[test]
    fn malformed_batches_fail_as_in_wasm() {
        let err = harness().push_batch(&[1, 0, 0, 0, 0, 0, 0, 0]).unwrap_err();
        assert!(
            err.message()
                .starts_with("malformed input batch: record 0 needs"),
            "{err}"
        );
    }

    #[test]
    fn restore_into_fresh_keeps_the_state() -> Result<()> {
        let mut h = harness();
        h.push("a", "abcd", 1)?;
        let snapshot = h.snapshot()?;
        h.push("a", "ef", 2)?;
        h.restore_into_fresh(&snapshot)?;
        assert_eq!(h.operator().bytes, 4);
        h.snapshot_and_restore()?;
        assert_eq!(h.operator().port_seen, Some(0));
        Ok(())
    }

    #[test]
    fn output_past_the_flush_threshold_comes_back_whole_and_in_order() -> Result<()> {
        let mut h = harness();
        let value = vec![b'v'; 200 * 1024];
        let input: Vec<_> = (0..12).map(|ts| record("k", &value, ts)).collect();
        let out = h.push_on(0, &input)?;
        assert_eq!(out.len(), 24);
        assert!(out.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
        Ok(())
    }

    #[test]
    fn restore_equivalence_holds_for_serde_state() {
        let input: Vec<_> = (0..7)
            .map(|i| record("k", "ab".repeat(i), i as i64))
            .collect();
        for every in 1..=3 {
            assert_restore_preserves_output::<Total>(&Context::new("total"), &input, every);
        }
    }

    #[test]
    #[should_panic(
        expected = "output changes when the operator is restored into a fresh \
                               instance after every 2 record(s)\nrecords differ at index 2"
    )]
    fn restore_equivalence_catches_lost_state() {
        let input: Vec<_> = (0..4).map(|i| record("k", "v", i)).collect();
        assert_restore_preserves_output::<Forgetful>(&Context::new("forgetful"), &input, 2);
    }

    #[test]
    fn debug_shows_text_or_hex() {
        assert_eq!(
            format!("{:?}", record("word", [0xff, 0x00], -1)),
            r#"OwnedRecord { key: "word", value: 0xff00, timestamp: -1 }"#
        );
        assert_eq!(
            format!("{:?}", record("", "a\nb", 0)),
            r#"OwnedRecord { key: "", value: 0x610a62, timestamp: 0 }"#
        );
    }

    #[test]
    fn diff_names_the_first_difference_and_lists_both_sides() {
        let left = [record("a", "1", 1), record("b", "1", 2)];
        let right = [
            record("a", "1", 1),
            record("b", "2", 2),
            record("c", "1", 3),
        ];
        let text = diff(("actual", &left), ("expected", &right)).unwrap();
        assert!(
            text.starts_with(
                "records differ at index 1 (actual: 2 records, expected: 3)\n  \
             actual:   OwnedRecord { key: \"b\", value: \"1\", timestamp: 2 }\n  \
             expected: OwnedRecord { key: \"b\", value: \"2\", timestamp: 2 }\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(" >   1: OwnedRecord { key: \"b\", value: \"2\""),
            "{text}"
        );
        assert_eq!(diff(("a", &left), ("b", &left)), None);
        let text = diff(("actual", &left[..1]), ("expected", &left)).unwrap();
        assert!(text.contains("actual:   (no record)"), "{text}");
    }
}
