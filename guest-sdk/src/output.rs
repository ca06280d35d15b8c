//! Where an operator's records go.
//!
//! [`Output`] encodes records straight into one reusable output batch. When the batch grows past
//! [`FLUSH_AT`] and at the end of every call it is handed on: to the host's `emit` import in the
//! wasm build, or kept for the native harness to decode. Both builds flush at the same points, so
//! the harness sees the batches the host would.

use weir_abi::{BatchBuilder, Record};

/// A batch is handed on once its encoding reaches this many bytes (1 MiB), which bounds the
/// guest memory that output takes while keeping host calls few.
pub(crate) const FLUSH_AT: usize = 1 << 20;

/// The sink for an operator's output records, given to [`Operator::process`] and
/// [`Operator::finish`].
///
/// [`Operator::process`]: crate::Operator::process
/// [`Operator::finish`]: crate::Operator::finish
#[derive(Debug)]
pub struct Output {
    /// The batch being filled; port 0, as output batches must be.
    batch: BatchBuilder,
    /// What happens to a batch once it is complete.
    sink: Sink,
}

/// Where complete batches go.
#[derive(Debug)]
pub(crate) enum Sink {
    /// The wasm build: to the host's `emit` import, right away.
    #[cfg_attr(
        not(target_arch = "wasm32"),
        allow(dead_code, reason = "only the wasm build hands batches to the host")
    )]
    Host(fn(&[u8])),
    /// The native harness: kept, in order, until the harness takes them.
    Keep(Vec<Vec<u8>>),
}

impl Output {
    pub(crate) fn new(sink: Sink) -> Self {
        Output {
            batch: BatchBuilder::new(0),
            sink,
        }
    }

    /// Emits one record.
    pub fn emit(&mut self, key: &[u8], value: &[u8], timestamp: i64) {
        self.batch.push(key, value, timestamp);
        if self.batch.encoded_len() >= FLUSH_AT {
            self.flush();
        }
    }

    /// Emits a copy of `record`, for example one taken from the input.
    pub fn emit_record(&mut self, record: &Record<'_>) {
        self.emit(record.key, record.value, record.timestamp);
    }

    /// Hands on the records emitted since the last flush, if any.
    pub(crate) fn flush(&mut self) {
        if self.batch.is_empty() {
            return;
        }
        match &mut self.sink {
            Sink::Host(emit) => {
                emit(self.batch.as_bytes());
                self.batch.clear();
            }
            Sink::Keep(batches) => batches.push(self.batch.take_bytes()),
        }
    }

    /// Drops the records emitted since the last flush (the call that emitted them failed).
    pub(crate) fn discard(&mut self) {
        self.batch.clear();
    }

    /// The batches kept so far, oldest first (always empty for [`Sink::Host`]).
    pub(crate) fn take_kept(&mut self) -> Vec<Vec<u8>> {
        match &mut self.sink {
            Sink::Host(_) => Vec::new(),
            Sink::Keep(batches) => std::mem::take(batches),
        }
    }
}

#[cfg(test)]
mod tests {
    use weir_abi::Batch;

    use super::*;

    #[test]
    fn flushes_a_batch_once_it_passes_the_threshold() {
        let mut out = Output::new(Sink::Keep(Vec::new()));
        let value = vec![b'v'; 300 * 1024];
        for ts in 0..4 {
            out.emit(b"k", &value, ts);
        }
        let kept = out.take_kept();
        assert_eq!(kept.len(), 1, "the 4th record takes the batch past 1 MiB");
        assert_eq!(Batch::decode(&kept[0]).unwrap().len(), 4);

        out.emit(b"k", b"small", 4);
        assert!(out.take_kept().is_empty());
        out.flush();
        let kept = out.take_kept();
        let batch = Batch::decode(&kept[0]).unwrap();
        assert_eq!((batch.port(), batch.len()), (0, 1));
    }

    #[test]
    fn flushing_nothing_hands_on_nothing() {
        let mut out = Output::new(Sink::Keep(Vec::new()));
        out.flush();
        assert!(out.take_kept().is_empty());
        out.emit(b"k", b"v", 0);
        out.discard();
        out.flush();
        assert!(out.take_kept().is_empty());
    }
}
