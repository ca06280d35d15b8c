//! The execution graph: the job graph expanded by parallelism into tasks, and
//! the channels between them.

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender};
use weir_abi::key_group::KeyGroups;

use crate::dataflow::channel::channel;
use crate::dataflow::message::Message;
use crate::ids::TaskId;
use crate::job::{Job, Partitioner};

/// One outgoing edge of a task, with the channels it feeds.
pub(crate) struct PlannedOutput {
    /// How records are spread over `channels`.
    pub partitioner: Partitioner,
    /// The receiver's input port for this edge.
    pub port: u32,
    /// The side output of the sending task this edge reads; `None` for its main output.
    pub output: Option<String>,
    /// One channel per downstream subtask reached (just one for `forward`).
    pub channels: Vec<Sender<Message>>,
    /// For `key-hash`: the receiving vertex's key groups, which the edge routes by.
    pub key_groups: Option<KeyGroups>,
}

/// The wiring of one task.
pub(crate) struct PlannedTask {
    /// Who the task is.
    pub id: TaskId,
    /// Its input channels, one per upstream task that feeds it, in port order.
    pub inputs: Vec<Receiver<Message>>,
    /// Its outgoing edges.
    pub outputs: Vec<PlannedOutput>,
}

/// Every task of the job with its channels, in the order of the job file's
/// vertices and then by subtask.
pub(crate) fn plan(job: &Job) -> Vec<PlannedTask> {
    let mut tasks: BTreeMap<TaskId, PlannedTask> = job
        .tasks()
        .map(|id| {
            (
                id.clone(),
                PlannedTask {
                    id,
                    inputs: Vec::new(),
                    outputs: Vec::new(),
                },
            )
        })
        .collect();
    let mut edges: Vec<_> = job.edges.iter().collect();
    edges.sort_by_key(|e| (e.to.clone(), e.port));
    for edge in edges {
        let up = job.vertex(&edge.from).expect("validated edge").parallelism;
        let receiver = job.vertex(&edge.to).expect("validated edge");
        let down = receiver.parallelism;
        let key_groups = (edge.partitioner == Partitioner::KeyHash).then(|| receiver.key_groups());
        for i in 0..up {
            let targets: Vec<u32> = match edge.partitioner {
                Partitioner::Forward => vec![i],
                _ => (0..down).collect(),
            };
            let mut senders = Vec::with_capacity(targets.len());
            for j in targets {
                let (tx, rx) = channel();
                senders.push(tx);
                tasks
                    .get_mut(&TaskId::new(&edge.to, j))
                    .expect("task of a vertex")
                    .inputs
                    .push(rx);
            }
            tasks
                .get_mut(&TaskId::new(&edge.from, i))
                .expect("task of a vertex")
                .outputs
                .push(PlannedOutput {
                    partitioner: edge.partitioner,
                    port: edge.port,
                    output: edge.output.clone(),
                    channels: senders,
                    key_groups,
                });
        }
    }
    let order: Vec<TaskId> = job.tasks().collect();
    order
        .into_iter()
        .map(|id| tasks.remove(&id).expect("planned above"))
        .collect()
}
