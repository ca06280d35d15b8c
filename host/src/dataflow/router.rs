//! Routing a task's output records to the tasks downstream, by the
//! partitioner of each outgoing edge.
//!
//! Records are appended to one [`BatchBuilder`] per downstream channel (with
//! that channel's input port already in its header) and sent when the batch
//! reaches [`BATCH_BYTES`] or the task flushes. Barriers, watermarks and end-of-input
//! markers go to every channel, after everything buffered before them.
//!
//! An operator has a main output and may have named side outputs (`docs/ABI.md` §15); each
//! edge reads one of them. Records on a side output no edge reads are dropped and counted.

use std::sync::Arc;

use crossbeam_channel::Sender;
use weir_abi::batch::{header_record_count, set_port};
use weir_abi::key_group::{KeyGroups, key_hash};
use weir_abi::{Batch, BatchBuilder, DecodeError};

use super::channel::{StopSignal, Stopped, send};
use super::message::Message;
use super::metrics::TaskMetrics;
use crate::job::Partitioner;

/// A batch is sent once its encoding reaches this many bytes.
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

/// The largest batch [`Router::push_batch`] passes on whole: larger ones are split into
/// batches of [`BATCH_BYTES`], so that a channel's capacity (in messages) keeps bounding the
/// bytes in flight.
const PASS_THROUGH_MAX_BYTES: usize = 2 * BATCH_BYTES;

/// One outgoing edge of a task: its partitioner and a channel per downstream subtask.
#[derive(Debug)]
pub(crate) struct OutputEdge {
    /// Which of the task's outputs the edge reads: 0 the main one, `k` the side output
    /// `Router::side_outputs[k - 1]`.
    output: u32,
    partitioner: Partitioner,
    /// Indexed by downstream subtask.
    channels: Vec<Sender<Message>>,
    /// Pending records per downstream subtask.
    builders: Vec<BatchBuilder>,
    /// Next channel for `rebalance`.
    next: usize,
    /// For `key-hash`: the downstream subtask of every key group (docs/ABI.md §16), indexed
    /// by key group: one modulo and one load per record.
    owners: Box<[u16]>,
}

impl OutputEdge {
    /// An edge to `channels` (one per downstream subtask, in subtask order),
    /// whose batches carry `port` as the receiver's input port.
    ///
    /// For `forward`, the caller passes just the one channel to its peer subtask.
    pub(crate) fn new(partitioner: Partitioner, port: u32, channels: Vec<Sender<Message>>) -> Self {
        let builders = channels
            .iter()
            .map(|_| BatchBuilder::with_capacity(port, BATCH_BYTES))
            .collect();
        let owners = match partitioner {
            Partitioner::KeyHash => owners(identity_key_groups(channels.len())),
            _ => Box::default(),
        };
        OutputEdge {
            output: MAIN_OUTPUT,
            partitioner,
            channels,
            builders,
            next: 0,
            owners,
        }
    }

    /// A `key-hash` edge routes by `groups`, the receiving vertex's key groups (as many
    /// subtasks as the edge has channels). Until told, it has one key group per channel.
    pub(crate) fn keyed_by(mut self, groups: KeyGroups) -> Self {
        debug_assert_eq!(groups.parallelism() as usize, self.channels.len());
        self.owners = owners(groups);
        self
    }
}

/// One key group per subtask: a key goes to subtask `key_hash % n`.
fn identity_key_groups(n: usize) -> KeyGroups {
    let n = u32::try_from(n.max(1)).expect("a vertex has at most 256 subtasks");
    KeyGroups::new(n, n).expect("n key groups over n subtasks")
}

/// The routing table of `groups`: the owner of every key group.
fn owners(groups: KeyGroups) -> Box<[u16]> {
    (0..groups.max_parallelism())
        .map(|group| u16::try_from(groups.owner(group)).expect("a vertex has at most 256 subtasks"))
        .collect()
}

/// The main output's number.
const MAIN_OUTPUT: u32 = 0;

/// Why a task could not route its output.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RouteError {
    /// The job is stopping.
    #[error(transparent)]
    Stopped(#[from] Stopped),
    /// A batch handed to the router was malformed (a bug in the host, since
    /// guest output is validated by the wasm layer).
    #[error("malformed batch: {0}")]
    Malformed(#[from] DecodeError),
}

/// All outgoing edges of one task.
#[derive(Debug)]
pub(crate) struct Router {
    edges: Vec<OutputEdge>,
    /// The names of the side outputs some edge reads: side output `k` is `side_outputs[k - 1]`.
    side_outputs: Vec<Box<str>>,
    stop: StopSignal,
    metrics: Arc<TaskMetrics>,
    /// Records routed since the metrics were last told: counted per batch sent, not per record,
    /// because an atomic add per record costs as much as routing the record.
    unreported_out: u64,
}

impl Router {
    /// A router over `edges` (empty for a sink).
    pub(crate) fn new(edges: Vec<OutputEdge>, stop: StopSignal, metrics: Arc<TaskMetrics>) -> Self {
        Router {
            edges,
            side_outputs: Vec::new(),
            stop,
            metrics,
            unreported_out: 0,
        }
    }

    /// A router over `edges` (as [`new`](Self::new)) and `side` edges, each reading the side
    /// output of its name.
    pub(crate) fn with_side_outputs(
        edges: Vec<OutputEdge>,
        side: Vec<(String, OutputEdge)>,
        stop: StopSignal,
        metrics: Arc<TaskMetrics>,
    ) -> Self {
        let mut router = Router::new(edges, stop, metrics);
        for (name, mut edge) in side {
            let index = match router.side_outputs.iter().position(|n| **n == *name) {
                Some(i) => i,
                None => {
                    router.side_outputs.push(name.into());
                    router.side_outputs.len() - 1
                }
            };
            edge.output = index as u32 + 1;
            router.edges.push(edge);
        }
        router
    }

    /// Routes one record on the main output.
    pub(crate) fn push(&mut self, key: &[u8], value: &[u8], timestamp: i64) -> Result<(), Stopped> {
        self.push_to(MAIN_OUTPUT, key, value, timestamp)
    }

    /// Routes one record on output `output`.
    fn push_to(
        &mut self,
        output: u32,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), Stopped> {
        self.unreported_out += 1;
        for e in 0..self.edges.len() {
            let edge = &mut self.edges[e];
            if edge.output != output {
                continue;
            }
            let n = edge.builders.len();
            let target = match edge.partitioner {
                Partitioner::Forward => Some(0),
                Partitioner::Rebalance => {
                    let i = edge.next;
                    edge.next = (i + 1) % n;
                    Some(i)
                }
                Partitioner::KeyHash => {
                    let group = key_hash(key) % edge.owners.len() as u64;
                    Some(usize::from(edge.owners[group as usize]))
                }
                Partitioner::Broadcast => None,
            };
            match target {
                Some(i) => {
                    edge.builders[i].push(key, value, timestamp);
                    if edge.builders[i].encoded_len() >= BATCH_BYTES {
                        self.send_builder(e, i)?;
                    }
                }
                None => {
                    for i in 0..n {
                        self.edges[e].builders[i].push(key, value, timestamp);
                        if self.edges[e].builders[i].encoded_len() >= BATCH_BYTES {
                            self.send_builder(e, i)?;
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Routes every record of an encoded batch that the caller has validated (guest output
    /// is, by the wasm layer, record by record).
    ///
    /// When the task has one outgoing edge, `forward` to a single channel, and the batch is not
    /// much larger than the router's own, it goes on as it is — only its port rewritten —
    /// instead of being decoded and encoded again record by record.
    pub(crate) fn push_batch(&mut self, mut bytes: Vec<u8>) -> Result<(), RouteError> {
        if let [edge] = self.edges.as_slice()
            && edge.output == MAIN_OUTPUT
            && edge.partitioner == Partitioner::Forward
            && edge.channels.len() == 1
            && bytes.len() <= PASS_THROUGH_MAX_BYTES
            && let Ok(records) = header_record_count(&bytes)
        {
            if !self.edges[0].builders[0].is_empty() {
                self.send_builder(0, 0)?;
            }
            let port = self.edges[0].builders[0].port();
            set_port(&mut bytes, port)?;
            self.metrics.add_records_out(u64::from(records));
            let edge = &self.edges[0];
            send(
                &edge.channels[0],
                Message::Batch(bytes),
                &self.stop,
                &self.metrics.backpressured_nanos,
            )?;
            return Ok(());
        }
        let batch = Batch::decode(&bytes)?;
        for r in batch.iter() {
            self.push(r.key, r.value, r.timestamp)?;
        }
        Ok(())
    }

    /// Routes every record of a validated batch the guest emitted on its side output `name`;
    /// records of an output no edge reads are dropped and counted as unwired.
    pub(crate) fn push_side_batch(&mut self, name: &str, bytes: &[u8]) -> Result<(), RouteError> {
        let batch = Batch::decode(bytes)?;
        let Some(index) = self.side_outputs.iter().position(|n| **n == *name) else {
            self.metrics.add_records_unwired(batch.len() as u64);
            return Ok(());
        };
        for r in batch.iter() {
            self.push_to(index as u32 + 1, r.key, r.value, r.timestamp)?;
        }
        Ok(())
    }

    /// Sends every non-empty pending batch. Afterwards the task's `records_out` counts every
    /// record routed so far.
    pub(crate) fn flush(&mut self) -> Result<(), Stopped> {
        self.report_out();
        for e in 0..self.edges.len() {
            for i in 0..self.edges[e].builders.len() {
                if !self.edges[e].builders[i].is_empty() {
                    self.send_builder(e, i)?;
                }
            }
        }
        Ok(())
    }

    /// Adds the records routed since the last report to the task's metrics.
    fn report_out(&mut self) {
        if self.unreported_out > 0 {
            self.metrics.add_records_out(self.unreported_out);
            self.unreported_out = 0;
        }
    }

    /// Flushes, then sends `msg` (a barrier, a watermark or end-of-input) on every channel.
    pub(crate) fn broadcast(&mut self, msg: Message) -> Result<(), Stopped> {
        self.flush()?;
        for edge in &self.edges {
            for ch in &edge.channels {
                send(
                    ch,
                    msg.clone(),
                    &self.stop,
                    &self.metrics.backpressured_nanos,
                )?;
            }
        }
        Ok(())
    }

    fn send_builder(&mut self, edge: usize, i: usize) -> Result<(), Stopped> {
        self.report_out();
        let edge = &mut self.edges[edge];
        let port = edge.builders[i].port();
        let full = std::mem::replace(
            &mut edge.builders[i],
            BatchBuilder::with_capacity(port, BATCH_BYTES),
        );
        send(
            &edge.channels[i],
            Message::Batch(full.into_bytes()),
            &self.stop,
            &self.metrics.backpressured_nanos,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(rx: &crossbeam_channel::Receiver<Message>) -> Vec<(u32, Vec<u8>)> {
        let mut out = Vec::new();
        while let Ok(Message::Batch(bytes)) = rx.try_recv() {
            let batch = Batch::decode(&bytes).unwrap();
            for r in batch.iter() {
                out.push((batch.port(), r.key.to_vec()));
            }
        }
        out
    }

    #[test]
    fn key_hash_sends_each_key_to_one_subtask_with_the_receivers_port() {
        let (tx0, rx0) = crossbeam_channel::unbounded();
        let (tx1, rx1) = crossbeam_channel::unbounded();
        let groups = KeyGroups::new(128, 2).unwrap();
        let edge = OutputEdge::new(Partitioner::KeyHash, 3, vec![tx0, tx1]).keyed_by(groups);
        let mut router = Router::new(vec![edge], StopSignal::new(), Arc::default());
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key-{i}").into_bytes()).collect();
        for k in keys.iter().chain(&keys) {
            router.push(k, b"", 0).unwrap();
        }
        router.flush().unwrap();
        let (got0, got1) = (drain(&rx0), drain(&rx1));
        assert_eq!(got0.len() + got1.len(), 400);
        // Both subtasks get keys, each the keys of its half of the key groups.
        assert!(!got0.is_empty() && !got1.is_empty());
        for (port, key) in got0.iter().chain(&got1) {
            assert_eq!(*port, 3);
            let owner = groups.subtask(key);
            assert!(if owner == 0 {
                got0.contains(&(3, key.clone()))
            } else {
                got1.contains(&(3, key.clone()))
            });
        }
    }

    /// `(port, keys)` of every batch on `rx`, one entry per batch.
    fn batches(rx: &crossbeam_channel::Receiver<Message>) -> Vec<(u32, Vec<Vec<u8>>)> {
        let mut out = Vec::new();
        while let Ok(Message::Batch(bytes)) = rx.try_recv() {
            let batch = Batch::decode(&bytes).unwrap();
            out.push((batch.port(), batch.iter().map(|r| r.key.to_vec()).collect()));
        }
        out
    }

    fn encoded(keys: &[&str]) -> Vec<u8> {
        let mut b = BatchBuilder::new(0);
        for k in keys {
            b.push(k.as_bytes(), b"v", 1);
        }
        b.into_bytes()
    }

    #[test]
    fn a_forward_edge_passes_a_batch_on_whole_after_what_was_pending_with_its_port() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let metrics = Arc::new(TaskMetrics::default());
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 2, vec![tx])],
            StopSignal::new(),
            Arc::clone(&metrics),
        );
        router.push(b"first", b"v", 0).unwrap();
        router.push_batch(encoded(&["a", "b", "c"])).unwrap();
        router.flush().unwrap();
        assert_eq!(
            batches(&rx),
            [
                (2, vec![b"first".to_vec()]),
                (2, vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()])
            ]
        );
        assert_eq!(metrics.records_out(), 4);
    }

    #[test]
    fn large_batches_and_other_partitioners_are_split_into_the_routers_batches() {
        // A batch over the pass-through size on a forward edge.
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx])],
            StopSignal::new(),
            Arc::default(),
        );
        let key = "k".repeat(1000);
        let records = PASS_THROUGH_MAX_BYTES / 1000 + 10;
        let many: Vec<&str> = (0..records).map(|_| key.as_str()).collect();
        router.push_batch(encoded(&many)).unwrap();
        router.flush().unwrap();
        let sent = batches(&rx);
        assert!(sent.len() > 1, "split into {} batches", sent.len());
        assert_eq!(sent.iter().map(|(_, k)| k.len()).sum::<usize>(), records);
        // Two edges: every record goes through the partitioners.
        let (tx0, rx0) = crossbeam_channel::unbounded();
        let (tx1, rx1) = crossbeam_channel::unbounded();
        let mut router = Router::new(
            vec![
                OutputEdge::new(Partitioner::Forward, 0, vec![tx0]),
                OutputEdge::new(Partitioner::Forward, 1, vec![tx1]),
            ],
            StopSignal::new(),
            Arc::default(),
        );
        router.push_batch(encoded(&["x", "y"])).unwrap();
        router.flush().unwrap();
        assert_eq!(batches(&rx0), [(0, vec![b"x".to_vec(), b"y".to_vec()])]);
        assert_eq!(batches(&rx1), [(1, vec![b"x".to_vec(), b"y".to_vec()])]);
    }

    #[test]
    fn side_outputs_reach_only_the_edges_reading_them_and_unwired_ones_are_counted() {
        let (main_tx, main_rx) = crossbeam_channel::unbounded();
        let (late_tx, late_rx) = crossbeam_channel::unbounded();
        let metrics = Arc::new(TaskMetrics::default());
        let mut router = Router::with_side_outputs(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![main_tx])],
            vec![(
                "late".to_string(),
                OutputEdge::new(Partitioner::Forward, 1, vec![late_tx]),
            )],
            StopSignal::new(),
            Arc::clone(&metrics),
        );
        // One edge reads the main output: the whole batch passes on, to it alone.
        router.push_batch(encoded(&["m"])).unwrap();
        router
            .push_side_batch("late", &encoded(&["l1", "l2"]))
            .unwrap();
        router
            .push_side_batch("nobody", &encoded(&["x", "y", "z"]))
            .unwrap();
        router.flush().unwrap();
        assert_eq!(batches(&main_rx), [(0, vec![b"m".to_vec()])]);
        assert_eq!(
            batches(&late_rx),
            [(1, vec![b"l1".to_vec(), b"l2".to_vec()])]
        );
        assert_eq!(metrics.records_unwired(), 3);
        // Watermarks and barriers go to every edge, side ones included.
        router
            .broadcast(Message::Watermark(super::super::watermark::Watermark::At(
                5,
            )))
            .unwrap();
        assert!(matches!(late_rx.try_recv(), Ok(Message::Watermark(_))));
        assert!(matches!(main_rx.try_recv(), Ok(Message::Watermark(_))));
    }

    #[test]
    fn barrier_follows_buffered_records() {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx])],
            StopSignal::new(),
            Arc::default(),
        );
        router.push(b"k", b"v", 1).unwrap();
        router.broadcast(Message::EndOfInput).unwrap();
        assert!(matches!(rx.try_recv(), Ok(Message::Batch(_))));
        assert_eq!(rx.try_recv(), Ok(Message::EndOfInput));
    }
}
