//! The execution graph: the job graph expanded by parallelism into tasks, the channels
//! between them, and which tasks run chained after another on its thread.
//!
//! # Chaining
//!
//! An edge chains its receiver after its sender ([`chains`]) when each sending subtask feeds
//! exactly one receiving subtask and that subtask has no other input: a `forward` edge between
//! vertices of equal parallelism, or any edge between two vertices of one subtask each (every
//! partitioner sends everything to the one subtask there is), into a vertex with no other input
//! edge, and neither vertex nor the job says `chain = false`. A chained task runs on the thread
//! of the task it is chained after, which hands it every message by a call: no channel, no copy
//! of the batch, no switch of thread. It stays a task of its own otherwise (docs/ARCHITECTURE.md).

use std::collections::BTreeMap;

use crossbeam_channel::{Receiver, Sender};
use weir_abi::key_group::KeyGroups;

use crate::dataflow::channel::channel;
use crate::dataflow::message::Message;
use crate::ids::TaskId;
use crate::job::{Edge, Job, Partitioner};

/// Where an outgoing edge of a task delivers to one downstream subtask.
pub(crate) enum PlannedTarget {
    /// The input channel of a task on another thread.
    Channel(Sender<Message>),
    /// This task, chained after the sender.
    Chained(TaskId),
}

/// One outgoing edge of a task, with the targets it feeds.
pub(crate) struct PlannedOutput {
    /// How records are spread over `targets`.
    pub partitioner: Partitioner,
    /// The receiver's input port for this edge.
    pub port: u32,
    /// The side output of the sending task this edge reads; `None` for its main output.
    pub output: Option<String>,
    /// One target per downstream subtask reached (just one for `forward`).
    pub targets: Vec<PlannedTarget>,
    /// For `key-hash`: the receiving vertex's key groups, which the edge routes by.
    pub key_groups: Option<KeyGroups>,
}

/// The wiring of one task.
pub(crate) struct PlannedTask {
    /// Who the task is.
    pub id: TaskId,
    /// Its input channels, one per upstream task that feeds it, in port order; empty for a
    /// chained task, whose one input is the call of the task it is chained after.
    pub inputs: Vec<Receiver<Message>>,
    /// Its outgoing edges.
    pub outputs: Vec<PlannedOutput>,
    /// Whether it runs chained after the task that feeds it, on that task's thread.
    pub chained: bool,
}

/// Whether `edge` chains its receiver's subtasks after its sender's: see the module's docs.
pub(crate) fn chains(job: &Job, edge: &Edge) -> bool {
    let (Some(from), Some(to)) = (job.vertex(&edge.from), job.vertex(&edge.to)) else {
        return false;
    };
    let pointwise = from.parallelism == to.parallelism
        && (edge.partitioner == Partitioner::Forward || to.parallelism == 1);
    job.chain && from.chain && to.chain && pointwise && job.inputs_of(&to.name).count() == 1
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
                    chained: false,
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
        // Into a vertex of one subtask, every partitioner sends everything to it: route as
        // `forward`, which passes an operator's output batches on whole.
        let partitioner = if down == 1 {
            Partitioner::Forward
        } else {
            edge.partitioner
        };
        let key_groups = (partitioner == Partitioner::KeyHash).then(|| receiver.key_groups());
        let chained = chains(job, edge);
        for i in 0..up {
            let subtasks: Vec<u32> = match partitioner {
                Partitioner::Forward if down == 1 => vec![0],
                Partitioner::Forward => vec![i],
                _ => (0..down).collect(),
            };
            let mut targets = Vec::with_capacity(subtasks.len());
            for j in subtasks {
                let receiving = tasks
                    .get_mut(&TaskId::new(&edge.to, j))
                    .expect("task of a vertex");
                if chained {
                    receiving.chained = true;
                    targets.push(PlannedTarget::Chained(receiving.id.clone()));
                } else {
                    let (tx, rx) = channel();
                    receiving.inputs.push(rx);
                    targets.push(PlannedTarget::Channel(tx));
                }
            }
            tasks
                .get_mut(&TaskId::new(&edge.from, i))
                .expect("task of a vertex")
                .outputs
                .push(PlannedOutput {
                    partitioner,
                    port: edge.port,
                    output: edge.output.clone(),
                    targets,
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

#[cfg(test)]
mod tests {
    use super::*;

    /// gen (p=`gen_p`) → `first` → a (p=`p`) → forward → b (p=`p`), and c (p=`p`) reading a
    /// and b; `top` and `a_settings` are extra lines of the file and of `a`'s table.
    fn job(gen_p: u32, first: &str, p: u32, top: &str, a_settings: &str) -> Job {
        let text = format!(
            "name = \"j\"\n{top}\n\
             [[source]]\nname = \"gen\"\ntype = \"generator\"\ncount = 10\nparallelism = {gen_p}\n\
             [[operator]]\nname = \"a\"\nmodule = \"op.wasm\"\nparallelism = {p}\n{a_settings}\n\
             inputs = [{{ from = \"gen\", partition = \"{first}\" }}]\n\
             [[operator]]\nname = \"b\"\nmodule = \"op.wasm\"\nparallelism = {p}\n\
             inputs = [{{ from = \"a\", partition = \"forward\" }}]\n\
             [[sink]]\nname = \"c\"\ntype = \"blackhole\"\nparallelism = {p}\n\
             inputs = [{{ from = \"a\", partition = \"forward\" }}, {{ from = \"b\", partition = \"forward\" }}]\n"
        );
        Job::from_str(&text, "/jobs", "j.toml").unwrap()
    }

    /// `from→to` of every edge that chains.
    fn chained(job: &Job) -> Vec<String> {
        job.edges
            .iter()
            .filter(|e| chains(job, e))
            .map(|e| format!("{}→{}", e.from, e.to))
            .collect()
    }

    #[test]
    fn forward_edges_of_equal_parallelism_into_a_single_input_chain() {
        // c has two inputs: it keeps its channels.
        assert_eq!(chained(&job(2, "forward", 2, "", "")), ["gen→a", "a→b"]);
        // A key-hash edge between two vertices of two subtasks each is not pointwise.
        assert_eq!(chained(&job(2, "key-hash", 2, "", "")), ["a→b"]);
        // Between single subtasks every partitioner is pointwise.
        for partition in ["key-hash", "rebalance", "broadcast"] {
            assert_eq!(chained(&job(1, partition, 1, "", "")), ["gen→a", "a→b"]);
        }
        // Two subtasks into one do not chain.
        assert_eq!(chained(&job(2, "key-hash", 1, "", "")), ["a→b"]);
    }

    #[test]
    fn chain_false_on_a_vertex_or_the_job_keeps_tasks_apart() {
        assert_eq!(chained(&job(1, "forward", 1, "", "chain = false")), [""; 0]);
        assert_eq!(chained(&job(1, "forward", 1, "chain = false", "")), [""; 0]);
    }

    #[test]
    fn kafka_sources_and_sinks_chain_like_any_vertex() {
        let text = "name = \"j\"\n[checkpoint]\ninterval = \"1s\"\n\
             [[source]]\nname = \"in\"\ntype = \"kafka\"\nbootstrap = \"b:9092\"\n\
             topics = [\"t\"]\nparallelism = 2\n\
             [[operator]]\nname = \"a\"\nmodule = \"op.wasm\"\nparallelism = 2\ninputs = [\"in\"]\n\
             [[sink]]\nname = \"out\"\ntype = \"kafka\"\ninputs = [\"a\"]\nparallelism = 2\n\
             bootstrap = \"b:9092\"\ntopic = \"u\"\n";
        let job = Job::from_str(text, "/jobs", "j.toml").unwrap();
        assert_eq!(chained(&job), ["in→a", "a→out"]);
    }

    #[test]
    fn a_chained_task_has_no_input_channel_and_its_sender_targets_it() {
        let tasks = plan(&job(2, "forward", 2, "", ""));
        let task = |name: &str, subtask: u32| {
            tasks
                .iter()
                .find(|t| t.id == TaskId::new(name, subtask))
                .unwrap()
        };
        for subtask in 0..2 {
            let a = task("a", subtask);
            assert!(a.chained && a.inputs.is_empty());
            let gen_targets = &task("gen", subtask).outputs[0].targets;
            assert!(
                matches!(gen_targets.as_slice(), [PlannedTarget::Chained(id)] if *id == a.id),
                "gen#{subtask} feeds a#{subtask} by a call"
            );
            // c reads a and b over channels, one each.
            let c = task("c", subtask);
            assert!(!c.chained);
            assert_eq!(c.inputs.len(), 2);
        }
    }

    #[test]
    fn an_edge_into_one_subtask_routes_as_forward_to_it() {
        let tasks = plan(&job(2, "key-hash", 1, "", ""));
        for subtask in 0..2 {
            let source = tasks
                .iter()
                .find(|t| t.id == TaskId::new("gen", subtask))
                .unwrap();
            let output = &source.outputs[0];
            assert_eq!(output.partitioner, Partitioner::Forward);
            assert!(output.key_groups.is_none());
            assert!(matches!(
                output.targets.as_slice(),
                [PlannedTarget::Channel(_)]
            ));
        }
        let a = tasks.iter().find(|t| t.id == TaskId::new("a", 0)).unwrap();
        assert_eq!(a.inputs.len(), 2);
    }
}
