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
//!
//! A downstream subtask is a [`Target`]: a channel to a task on another thread, or a task
//! chained after this one ([`ChainedTask`]), which runs on this task's thread and takes what
//! the channel would have carried by a call — no channel, no copy of the batch, no switch of
//! thread (operator chaining, docs/ARCHITECTURE.md).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;
use weir_abi::batch::{header_record_count, set_port};
use weir_abi::key_group::{KeyGroups, key_hash};
use weir_abi::{Batch, BatchBuilder};

use super::channel::{StopSignal, send};
use super::error::{RouteError, TaskError};
use super::message::{Control, Message};
use super::metrics::TaskMetrics;
use crate::ids::TaskId;
use crate::job::Partitioner;

/// A batch is sent once its encoding reaches this many bytes.
pub(crate) const BATCH_BYTES: usize = 64 * 1024;

/// The largest batch [`Router::push_batch`] passes on whole: larger ones are split into
/// batches of [`BATCH_BYTES`], so that a channel's capacity (in messages) keeps bounding the
/// bytes in flight.
const PASS_THROUGH_MAX_BYTES: usize = 2 * BATCH_BYTES;

/// A task chained after another: it runs on that task's thread, and takes by a call what an
/// edge would otherwise send it on a channel. It has one input, the edge that chains it.
pub(crate) trait ChainedTask: Send {
    /// Who the task is.
    fn id(&self) -> &TaskId;
    /// Takes `msg` as if it had come on its input channel. A failure names the task that
    /// failed — this one or one chained after it ([`TaskError::Chained`]) — so that it is
    /// reported as that task's, not the chain head's.
    fn deliver(&mut self, msg: Message) -> Result<(), TaskError>;
    /// What the job's driver told the head of the chain that concerns this task too
    /// ([`Control::Complete`], [`Control::Abort`]); passed on down the chain.
    fn control(&mut self, control: &Control) -> Result<(), TaskError>;
    /// When the next processing-time timer of this task, or of one chained after it, is due.
    fn next_processing_timer(&self) -> Option<i64>;
    /// Fires the processing-time timers due at `now` of this task and of those chained after
    /// it.
    fn fire_processing_timers(&mut self, now: i64) -> Result<(), TaskError>;
}

/// Where an edge delivers what it routes to one downstream subtask.
pub(crate) enum Target {
    /// The input channel of a task on another thread.
    Channel(Sender<Message>),
    /// A task chained after this one, on this thread.
    Chained(Box<dyn ChainedTask>),
}

impl fmt::Debug for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Channel(_) => f.write_str("Channel"),
            Target::Chained(task) => write!(f, "Chained({})", task.id()),
        }
    }
}

impl From<Sender<Message>> for Target {
    fn from(sender: Sender<Message>) -> Self {
        Target::Channel(sender)
    }
}

impl Target {
    /// Hands `msg` over: sends it on the channel (waiting while it is full, the time counted
    /// as `backpressured_nanos`), or has the chained task take it now (the time it takes
    /// added to `chained`).
    fn deliver(
        &mut self,
        msg: Message,
        stop: &StopSignal,
        backpressured_nanos: &std::sync::atomic::AtomicU64,
        chained: &mut Duration,
    ) -> Result<(), RouteError> {
        match self {
            Target::Channel(sender) => Ok(send(sender, msg, stop, backpressured_nanos)?),
            Target::Chained(task) => {
                let started = Instant::now();
                let result = task.deliver(msg).map_err(RouteError::from_chained);
                *chained += started.elapsed();
                result
            }
        }
    }
}

/// One outgoing edge of a task: its partitioner and a target per downstream subtask.
#[derive(Debug)]
pub(crate) struct OutputEdge {
    /// Which of the task's outputs the edge reads: 0 the main one, `k` the side output
    /// `Router::side_outputs[k - 1]`.
    output: u32,
    partitioner: Partitioner,
    /// Indexed by downstream subtask.
    targets: Vec<Target>,
    /// Pending records per downstream subtask.
    builders: Vec<BatchBuilder>,
    /// Next channel for `rebalance`.
    next: usize,
    /// For `key-hash`: the downstream subtask of every key group (docs/ABI.md §16), indexed
    /// by key group: one modulo and one load per record.
    owners: Box<[u16]>,
}

impl OutputEdge {
    /// An edge to `targets` (one per downstream subtask, in subtask order),
    /// whose batches carry `port` as the receiver's input port.
    ///
    /// For `forward`, the caller passes just the one target, its peer subtask.
    pub(crate) fn new(partitioner: Partitioner, port: u32, targets: Vec<Target>) -> Self {
        let builders = targets
            .iter()
            .map(|_| BatchBuilder::with_capacity(port, BATCH_BYTES))
            .collect();
        let owners = match partitioner {
            Partitioner::KeyHash => owners(identity_key_groups(targets.len())),
            _ => Box::default(),
        };
        OutputEdge {
            output: MAIN_OUTPUT,
            partitioner,
            targets,
            builders,
            next: 0,
            owners,
        }
    }

    /// A `key-hash` edge routes by `groups`, the receiving vertex's key groups (as many
    /// subtasks as the edge has channels). Until told, it has one key group per channel.
    pub(crate) fn keyed_by(mut self, groups: KeyGroups) -> Self {
        debug_assert_eq!(groups.parallelism() as usize, self.targets.len());
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

/// Whether `edges` is a single `forward` edge from the main output to one target
/// ([`Router::sole_forward`]).
fn is_sole_forward(edges: &[OutputEdge]) -> bool {
    matches!(edges, [edge] if edge.output == MAIN_OUTPUT
        && edge.partitioner == Partitioner::Forward
        && edge.targets.len() == 1)
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
    /// The time the tasks chained after this one have taken over what they were handed, so
    /// far: the time of this task's work is what it spent less that.
    chained_time: Duration,
    /// Whether the task has a single edge, `forward` from its main output to one target: the
    /// common case of a chain, routed without choosing an edge or a target per record.
    sole_forward: bool,
}

impl Router {
    /// A router over `edges` (empty for a sink).
    pub(crate) fn new(edges: Vec<OutputEdge>, stop: StopSignal, metrics: Arc<TaskMetrics>) -> Self {
        Router {
            sole_forward: is_sole_forward(&edges),
            edges,
            side_outputs: Vec::new(),
            stop,
            metrics,
            unreported_out: 0,
            chained_time: Duration::ZERO,
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
        router.sole_forward = is_sole_forward(&router.edges);
        router
    }

    /// Routes one record on the main output.
    ///
    /// Inlined into the sources' loops: with a sole `forward` edge this is a batch builder's
    /// push and a size check, where a call choosing an edge and a target per record was 5 % of
    /// a chained stateless job's time. Forced (`always`, down to
    /// [`push_into`](Self::push_into)): left to LLVM's cost model, a move of the error types to
    /// another file (`235719d`) was enough to take it out of line again, +40 instructions a
    /// record under callgrind (docs/BENCHMARKS.md §2).
    #[inline(always)]
    pub(crate) fn push(
        &mut self,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), RouteError> {
        if self.sole_forward {
            self.unreported_out += 1;
            return self.push_into(0, 0, key, value, timestamp);
        }
        self.push_to(MAIN_OUTPUT, key, value, timestamp)
    }

    /// Routes one record on output `output`.
    fn push_to(
        &mut self,
        output: u32,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), RouteError> {
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
                Some(i) => self.push_into(e, i, key, value, timestamp)?,
                None => {
                    for i in 0..n {
                        self.push_into(e, i, key, value, timestamp)?;
                    }
                }
            }
        }
        Ok(())
    }

    /// Appends one record to the batch pending for target `i` of edge `e`, and sends that
    /// batch once it is full.
    ///
    /// Always inlined, and the send kept out of line ([`send_builder`](Self::send_builder) is
    /// cold): left to the cost model, this was inlined or not depending on which codegen unit
    /// the error types landed in, and the call cost ~40 instructions a record (5 %) when not.
    #[inline(always)]
    fn push_into(
        &mut self,
        e: usize,
        i: usize,
        key: &[u8],
        value: &[u8],
        timestamp: i64,
    ) -> Result<(), RouteError> {
        let builder = &mut self.edges[e].builders[i];
        builder.push(key, value, timestamp);
        if builder.encoded_len() >= BATCH_BYTES {
            return self.send_builder(e, i);
        }
        Ok(())
    }

    /// Routes every record of an encoded batch that the caller has validated (guest output
    /// is, by the wasm layer, record by record).
    ///
    /// When the task has one outgoing edge, `forward` to a single target, and the batch is not
    /// much larger than the router's own, it goes on as it is — only its port rewritten —
    /// instead of being decoded and encoded again record by record.
    pub(crate) fn push_batch(&mut self, mut bytes: Vec<u8>) -> Result<(), RouteError> {
        if self.sole_forward
            && bytes.len() <= PASS_THROUGH_MAX_BYTES
            && let Ok(records) = header_record_count(&bytes)
        {
            if !self.edges[0].builders[0].is_empty() {
                self.send_builder(0, 0)?;
            }
            let port = self.edges[0].builders[0].port();
            set_port(&mut bytes, port)?;
            self.metrics.add_records_out(u64::from(records));
            return self.edges[0].targets[0].deliver(
                Message::Batch(bytes),
                &self.stop,
                &self.metrics.backpressured_nanos,
                &mut self.chained_time,
            );
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
    pub(crate) fn flush(&mut self) -> Result<(), RouteError> {
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

    /// Flushes, then delivers `msg` (a barrier, a watermark or end-of-input) to every target.
    pub(crate) fn broadcast(&mut self, msg: Message) -> Result<(), RouteError> {
        self.flush()?;
        for edge in &mut self.edges {
            for target in &mut edge.targets {
                target.deliver(
                    msg.clone(),
                    &self.stop,
                    &self.metrics.backpressured_nanos,
                    &mut self.chained_time,
                )?;
            }
        }
        Ok(())
    }

    /// Sends the batch pending for target `i` of `edge`: once per full batch, so out of the
    /// per-record path ([`push_into`](Self::push_into)).
    #[cold]
    #[inline(never)]
    fn send_builder(&mut self, edge: usize, i: usize) -> Result<(), RouteError> {
        self.report_out();
        let edge = &mut self.edges[edge];
        let port = edge.builders[i].port();
        let full = std::mem::replace(
            &mut edge.builders[i],
            BatchBuilder::with_capacity(port, BATCH_BYTES),
        );
        edge.targets[i].deliver(
            Message::Batch(full.into_bytes()),
            &self.stop,
            &self.metrics.backpressured_nanos,
            &mut self.chained_time,
        )
    }

    /// The time the tasks chained after this one have taken so far over what the router
    /// handed them: a task measuring its own work subtracts what this grew by meanwhile.
    pub(crate) fn chained_time(&self) -> Duration {
        self.chained_time
    }

    /// The tasks chained after this one (directly; each passes on to its own).
    fn chained(&mut self) -> impl Iterator<Item = &mut Box<dyn ChainedTask>> {
        self.edges
            .iter_mut()
            .flat_map(|edge| edge.targets.iter_mut())
            .filter_map(|target| match target {
                Target::Chained(task) => Some(task),
                Target::Channel(_) => None,
            })
    }

    /// Passes `control` on to the tasks chained after this one.
    pub(crate) fn control_chained(&mut self, control: &Control) -> Result<(), TaskError> {
        for task in self.chained() {
            task.control(control)?;
        }
        Ok(())
    }

    /// When the next processing-time timer of a task chained after this one is due.
    pub(crate) fn next_chained_timer(&self) -> Option<i64> {
        self.edges
            .iter()
            .flat_map(|edge| &edge.targets)
            .filter_map(|target| match target {
                Target::Chained(task) => task.next_processing_timer(),
                Target::Channel(_) => None,
            })
            .min()
    }

    /// Fires the processing-time timers due at `now` of the tasks chained after this one.
    pub(crate) fn fire_chained_timers(&mut self, now: i64) -> Result<(), TaskError> {
        for task in self.chained() {
            task.fire_processing_timers(now)?;
        }
        Ok(())
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
        let edge =
            OutputEdge::new(Partitioner::KeyHash, 3, vec![tx0.into(), tx1.into()]).keyed_by(groups);
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

    #[test]
    fn records_reach_every_edge_of_the_main_output_and_a_sole_forward_one_in_full_batches() {
        let (a_tx, a_rx) = crossbeam_channel::unbounded();
        let (b_tx, b_rx) = crossbeam_channel::unbounded();
        let (side_tx, side_rx) = crossbeam_channel::unbounded();
        // The main output read by two vertices, each through a forward edge; a side output too.
        let mut fan_out = Router::with_side_outputs(
            vec![
                OutputEdge::new(Partitioner::Forward, 1, vec![a_tx.into()]),
                OutputEdge::new(Partitioner::Forward, 2, vec![b_tx.into()]),
            ],
            vec![(
                "late".to_string(),
                OutputEdge::new(Partitioner::Forward, 3, vec![side_tx.into()]),
            )],
            StopSignal::new(),
            Arc::default(),
        );
        let keys: Vec<Vec<u8>> = (0..5_000)
            .map(|i| format!("key-{i}").into_bytes())
            .collect();
        for k in &keys {
            fan_out.push(k, b"value", 0).unwrap();
        }
        fan_out.flush().unwrap();
        let on = |port: u32| keys.iter().map(|k| (port, k.clone())).collect::<Vec<_>>();
        assert_eq!(drain(&a_rx), on(1));
        assert_eq!(drain(&b_rx), on(2));
        assert!(
            drain(&side_rx).is_empty(),
            "the side output gets no main records"
        );

        // A sole forward edge: every record, in order, in batches cut at the batch size.
        let (tx, rx) = crossbeam_channel::unbounded();
        let edge = OutputEdge::new(Partitioner::Forward, 4, vec![tx.into()]);
        let mut sole = Router::new(vec![edge], StopSignal::new(), Arc::default());
        for k in &keys {
            sole.push(k, b"value", 0).unwrap();
        }
        let full = batches(&rx);
        sole.flush().unwrap();
        assert!(!full.is_empty(), "a full batch goes before the flush");
        for (port, batch) in &full {
            assert_eq!(*port, 4);
            let len = weir_abi::batch::HEADER_LEN
                + batch
                    .iter()
                    .map(|k| weir_abi::batch::encoded_record_len(k.len(), 5))
                    .sum::<usize>();
            let last = weir_abi::batch::encoded_record_len(batch[batch.len() - 1].len(), 5);
            assert!(
                len >= BATCH_BYTES && len - last < BATCH_BYTES,
                "a batch is sent with the record that fills it: {len} bytes"
            );
        }
        let mut sent: Vec<Vec<u8>> = full.into_iter().flat_map(|(_, keys)| keys).collect();
        sent.extend(drain(&rx).into_iter().map(|(_, key)| key));
        assert_eq!(sent, keys);
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
            vec![OutputEdge::new(Partitioner::Forward, 2, vec![tx.into()])],
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
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx.into()])],
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
                OutputEdge::new(Partitioner::Forward, 0, vec![tx0.into()]),
                OutputEdge::new(Partitioner::Forward, 1, vec![tx1.into()]),
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
            vec![OutputEdge::new(
                Partitioner::Forward,
                0,
                vec![main_tx.into()],
            )],
            vec![(
                "late".to_string(),
                OutputEdge::new(Partitioner::Forward, 1, vec![late_tx.into()]),
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
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx.into()])],
            StopSignal::new(),
            Arc::default(),
        );
        router.push(b"k", b"v", 1).unwrap();
        router.broadcast(Message::EndOfInput).unwrap();
        assert!(matches!(rx.try_recv(), Ok(Message::Batch(_))));
        assert_eq!(rx.try_recv(), Ok(Message::EndOfInput));
    }

    /// A chained task that records what it is handed, and fails on a batch once told to.
    struct Recorder {
        id: TaskId,
        seen: Arc<std::sync::Mutex<Vec<String>>>,
        fail: bool,
    }

    impl ChainedTask for Recorder {
        fn id(&self) -> &TaskId {
            &self.id
        }
        fn deliver(&mut self, msg: Message) -> Result<(), TaskError> {
            let seen = match &msg {
                Message::Batch(bytes) => {
                    let batch = Batch::decode(bytes).unwrap();
                    let keys: Vec<String> = batch
                        .iter()
                        .map(|r| String::from_utf8_lossy(r.key).into_owned())
                        .collect();
                    format!("batch port {} {}", batch.port(), keys.join(","))
                }
                other => format!("{other:?}"),
            };
            self.seen.lock().unwrap().push(seen);
            if self.fail && matches!(msg, Message::Batch(_)) {
                return Err(TaskError::Restore("boom".into()).of_chained(&self.id));
            }
            Ok(())
        }
        fn control(&mut self, control: &Control) -> Result<(), TaskError> {
            self.seen.lock().unwrap().push(format!("{control:?}"));
            Ok(())
        }
        fn next_processing_timer(&self) -> Option<i64> {
            Some(7)
        }
        fn fire_processing_timers(&mut self, now: i64) -> Result<(), TaskError> {
            self.seen.lock().unwrap().push(format!("timers at {now}"));
            Ok(())
        }
    }

    fn recorder(fail: bool) -> (Target, Arc<std::sync::Mutex<Vec<String>>>) {
        let seen = Arc::default();
        let target = Target::Chained(Box::new(Recorder {
            id: TaskId::new("down", 1),
            seen: Arc::clone(&seen),
            fail,
        }));
        (target, seen)
    }

    #[test]
    fn a_chained_task_is_handed_batches_and_markers_in_order_by_a_call() {
        let (target, seen) = recorder(false);
        let metrics = Arc::new(TaskMetrics::default());
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![target])],
            StopSignal::new(),
            Arc::clone(&metrics),
        );
        router.push(b"a", b"v", 1).unwrap();
        router.push_batch(encoded(&["b", "c"])).unwrap();
        router
            .broadcast(Message::Barrier(crate::ids::Barrier {
                id: crate::ids::CheckpointId(3),
                kind: crate::ids::CheckpointKind::Checkpoint,
            }))
            .unwrap();
        router.broadcast(Message::EndOfInput).unwrap();
        router
            .control_chained(&Control::Complete(crate::ids::CheckpointId(3)))
            .unwrap();
        assert_eq!(router.next_chained_timer(), Some(7));
        router.fire_chained_timers(9).unwrap();
        let seen = seen.lock().unwrap().clone();
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert_eq!(seen[0], "batch port 0 a");
        // The guest's batch went on whole, after what was pending.
        assert_eq!(seen[1], "batch port 0 b,c");
        assert!(seen[2].starts_with("Barrier"), "{seen:?}");
        assert_eq!(seen[3], "EndOfInput");
        assert!(seen[4].starts_with("Complete"), "{seen:?}");
        assert_eq!(seen[5..], ["timers at 9"]);
        assert_eq!(metrics.records_out(), 3);
    }

    #[test]
    fn a_chained_tasks_failure_comes_back_naming_it() {
        let (target, _) = recorder(true);
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![target])],
            StopSignal::new(),
            Arc::default(),
        );
        router.push(b"a", b"v", 1).unwrap();
        let error = TaskError::from(router.flush().unwrap_err());
        match error {
            TaskError::Chained { task, error } => {
                assert_eq!(task, TaskId::new("down", 1));
                assert_eq!(error.to_string(), "cannot restore task state: boom");
            }
            other => panic!("not a chained failure: {other:?}"),
        }
    }
}
