//! One job across many processes: which part of the job worker `I` of `N` runs.
//!
//! Why a module of its own: the cut is a pure function of the job graph, and whether a
//! record reaches the right process — and its keyed state the right worker after a crash —
//! depends only on it, so it is planned here, tested without a broker, and the runtime runs
//! what it is handed.
//!
//! # The plan
//!
//! The job is cut at its `key-hash` edges into **stages**: the pieces left joined by
//! `forward` and `rebalance` edges. Each cut edge becomes a Kafka topic, the **exchange**
//! `weir.<job>.<from>.<to>.<port>.<id>` (`<id>` the id of the job's checkpoints, so a job
//! started afresh, its checkpoints removed, gets new, empty topics instead of reading what
//! its earlier history left), with one partition per key group of the receiving
//! operator: the sending stage writes it through an exactly-once Kafka sink that puts each
//! record in the partition of its key's group (what a `key-hash` edge routes by), the
//! receiving stage reads it through a Kafka source whose subtask `j` reads the partitions of
//! the key groups that subtask owns, and forwards to the operator. No barrier crosses a
//! process: each stage of each worker is a job of its own, with its own checkpoints (under
//! `<directory>/worker-I-of-N/stage-K`), restored on its own; exactly-once between stages is
//! the Kafka sink's and source's (docs/CHECKPOINTS.md §12).
//!
//! Every worker runs every stage, as the subtasks `I·p .. (I+1)·p` of a job at parallelism
//! `N·p` (`p` each vertex's parallelism in the job file): its Kafka sources read that share of
//! their partitions, its sinks use their own transactional ids (`<prefix>.wI-<subtask>`), and
//! the exchange partitions of its key groups are its own. So the job behaves as the one job at
//! parallelism `N·p`, and a worker restarted with its index finds its checkpoints.
//!
//! # What a job run by workers cannot have (refused by name)
//!
//! - sources and sinks other than Kafka: a file or a generator is on one machine;
//! - `broadcast` edges, which would have to reach every worker;
//! - watermarks (a source's `watermark` table): they do not cross an exchange yet;
//! - an operator fed by a `key-hash` edge with fewer key groups than its subtasks over all
//!   workers (`max_parallelism` below `N·p`).

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::job::{
    Delivery, Edge, Isolation, Job, KafkaField, KafkaSinkSettings, KafkaSourceSettings, KafkaStart,
    KafkaUntil, OnError, PartitionShare, Partitioner, ShareBy, SinkKind, SinkPartitioning,
    SinkTimestamp, SinkTopic, SourceKind, TopicSelection, Vertex, VertexKind,
};

/// `--worker I/N`: this process is worker `index` of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Worker {
    /// From 0.
    pub index: u32,
    /// At least 1.
    pub count: u32,
}

impl FromStr for Worker {
    type Err = String;

    fn from_str(text: &str) -> Result<Worker, String> {
        let parsed = text.split_once('/').and_then(|(i, n)| {
            Some(Worker {
                index: i.trim().parse().ok()?,
                count: n.trim().parse().ok()?,
            })
        });
        match parsed {
            Some(worker) if worker.index < worker.count => Ok(worker),
            _ => Err(format!(
                "{text:?} is not a worker: write I/N, this process's index I from 0 to N-1 of N \
                 workers (0/3, 1/3, 2/3)"
            )),
        }
    }
}

impl fmt::Display for Worker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// Why a job cannot run as workers, naming the vertex or edge and the way out.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkersError {
    /// A source or sink that is not Kafka.
    #[error(
        "{kind} `{vertex}` is {what}, which lives on one machine: a job run by workers reads \
         and writes Kafka topics only (run it as one process, without --worker)"
    )]
    NotKafka {
        /// `source` or `sink`.
        kind: &'static str,
        /// The vertex.
        vertex: String,
        /// What it is (`a file source`).
        what: &'static str,
    },
    /// A broadcast edge.
    #[error(
        "the edge from `{from}` to `{to}` is broadcast, which would have to reach every worker: \
         a job run by workers cannot have one yet"
    )]
    Broadcast {
        /// The sender.
        from: String,
        /// The receiver.
        to: String,
    },
    /// A source with watermarks.
    #[error(
        "source `{vertex}` makes watermarks, which do not cross between workers yet: remove its \
         `watermark` table, or run the job as one process"
    )]
    Watermarks {
        /// The source.
        vertex: String,
    },
    /// Too few key groups for the subtasks of all workers.
    #[error(
        "`{vertex}` has {key_groups} key groups, fewer than its {subtasks} subtasks over {workers} \
         workers: set max_parallelism to at least {subtasks}"
    )]
    TooFewKeyGroups {
        /// The operator.
        vertex: String,
        /// Its key groups.
        key_groups: u32,
        /// Its parallelism times the workers.
        subtasks: u32,
        /// The workers.
        workers: u32,
    },
    /// A name that cannot be part of a Kafka topic name.
    #[error(
        "`{name}` cannot name a topic between workers: a job run by workers needs job and \
         vertex names of ASCII letters, digits, `-` and `_`"
    )]
    Name {
        /// The job's or a vertex's name.
        name: String,
    },
    /// A vertex of the plan would take a name the job already uses.
    #[error(
        "`{name}` is the name the exchange into `{to}` takes in a job run by workers: rename \
         that vertex"
    )]
    Taken {
        /// The name.
        name: String,
        /// The receiver of the exchange.
        to: String,
    },
}

/// What worker `worker` runs of `job`: one job per stage, in the order records flow (an
/// exchange's sending stage before its receiver), each with its own checkpoint directory.
/// `history` names the job's history (the id of its checkpoints,
/// [`storage_id`](crate::checkpoint::storage::CheckpointStorage::storage_id)): the exchange
/// topics are that history's, so a job started afresh never reads records an earlier history
/// left in them.
pub fn plan(job: &Job, worker: Worker, history: &str) -> Result<Vec<Job>, WorkersError> {
    check(job, worker)?;
    let stage_of = stages(job);
    let count = stage_of.values().copied().max().map_or(0, |s| s + 1);
    let mut plans: Vec<Job> = (0..count)
        .map(|stage| stage_job(job, worker, stage))
        .collect();
    for vertex in &job.vertices {
        let mut vertex = vertex.clone();
        share(&mut vertex, worker);
        plans[stage_of[&vertex.name]].vertices.push(vertex);
    }
    for edge in &job.edges {
        if edge.partitioner != Partitioner::KeyHash {
            plans[stage_of[&edge.from]].edges.push(edge.clone());
            continue;
        }
        let (from, to) = (vertex_of(job, &edge.from), vertex_of(job, &edge.to));
        let name = exchange_name(edge);
        let topic = exchange_topic(job, edge, history);
        let sender = &mut plans[stage_of[&edge.from]];
        sender
            .vertices
            .push(exchange_sink(job, worker, edge, &topic, from, to));
        sender.edges.push(Edge {
            from: edge.from.clone(),
            to: name.clone(),
            port: 0,
            partitioner: Partitioner::Forward,
            output: edge.output.clone(),
        });
        let receiver = &mut plans[stage_of[&edge.to]];
        receiver
            .vertices
            .push(exchange_source(job, worker, edge, &topic, to));
        receiver.edges.push(Edge {
            from: name,
            to: edge.to.clone(),
            port: edge.port,
            partitioner: Partitioner::Forward,
            output: None,
        });
    }
    for plan in &mut plans {
        order(plan);
    }
    Ok(plans)
}

/// The name of the exchange vertices of a cut edge: the sink in the sending stage and the
/// source in the receiving one (two jobs, so one name).
fn exchange_name(edge: &Edge) -> String {
    format!("exchange-{}-{}", edge.to, edge.port)
}

/// The topic of a cut edge in the job's history `history`.
pub fn exchange_topic(job: &Job, edge: &Edge, history: &str) -> String {
    format!(
        "weir.{}.{}.{}.{}.{history}",
        job.name, edge.from, edge.to, edge.port
    )
}

fn vertex_of<'j>(job: &'j Job, name: &str) -> &'j Vertex {
    job.vertex(name).expect("edges join the job's vertices")
}

/// Refuses what a job run by workers cannot have.
fn check(job: &Job, worker: Worker) -> Result<(), WorkersError> {
    let plain = |name: &str| {
        !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    };
    if !plain(&job.name) {
        return Err(WorkersError::Name {
            name: job.name.clone(),
        });
    }
    for vertex in &job.vertices {
        let what = match &vertex.kind {
            VertexKind::Source(SourceKind::File { .. }) => Some(("source", "a file source")),
            VertexKind::Source(SourceKind::Generator(_)) => Some(("source", "a generator")),
            VertexKind::Sink(SinkKind::File { .. }) => Some(("sink", "a file sink")),
            VertexKind::Sink(SinkKind::Stdout) => Some(("sink", "the standard output")),
            VertexKind::Sink(SinkKind::Blackhole) => Some(("sink", "a blackhole")),
            _ => None,
        };
        if let Some((kind, what)) = what {
            return Err(WorkersError::NotKafka {
                kind,
                vertex: vertex.name.clone(),
                what,
            });
        }
        if vertex.watermark.is_some() {
            return Err(WorkersError::Watermarks {
                vertex: vertex.name.clone(),
            });
        }
    }
    for edge in &job.edges {
        match edge.partitioner {
            Partitioner::Broadcast => {
                return Err(WorkersError::Broadcast {
                    from: edge.from.clone(),
                    to: edge.to.clone(),
                });
            }
            Partitioner::KeyHash => {
                for name in [&edge.from, &edge.to] {
                    if !plain(name) {
                        return Err(WorkersError::Name { name: name.clone() });
                    }
                }
                let to = vertex_of(job, &edge.to);
                let subtasks = to.parallelism * worker.count;
                if to.max_parallelism < subtasks {
                    return Err(WorkersError::TooFewKeyGroups {
                        vertex: to.name.clone(),
                        key_groups: to.max_parallelism,
                        subtasks,
                        workers: worker.count,
                    });
                }
                let name = exchange_name(edge);
                if job.vertex(&name).is_some() {
                    return Err(WorkersError::Taken {
                        name,
                        to: edge.to.clone(),
                    });
                }
            }
            Partitioner::Forward | Partitioner::Rebalance => {}
        }
    }
    Ok(())
}

/// The stage of every vertex: the pieces the job falls into without its key-hash edges,
/// numbered in the order of their first vertex (topological, so a stage's senders come
/// before it).
fn stages(job: &Job) -> BTreeMap<String, usize> {
    let index: BTreeMap<&str, usize> = job
        .vertices
        .iter()
        .enumerate()
        .map(|(i, v)| (v.name.as_str(), i))
        .collect();
    let mut parent: Vec<usize> = (0..job.vertices.len()).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    for edge in job
        .edges
        .iter()
        .filter(|e| e.partitioner != Partitioner::KeyHash)
    {
        let (a, b) = (
            root(&mut parent, index[edge.from.as_str()]),
            root(&mut parent, index[edge.to.as_str()]),
        );
        let (low, high) = (a.min(b), a.max(b));
        parent[high] = low;
    }
    let mut numbers: BTreeMap<usize, usize> = BTreeMap::new();
    let mut stage_of = BTreeMap::new();
    for (i, vertex) in job.vertices.iter().enumerate() {
        let r = root(&mut parent, i);
        let next = numbers.len();
        let stage = *numbers.entry(r).or_insert(next);
        stage_of.insert(vertex.name.clone(), stage);
    }
    stage_of
}

/// Stage `stage` of `job` for `worker`, without vertices and edges yet: the job's settings,
/// its checkpoints in a directory of their own.
fn stage_job(job: &Job, worker: Worker, stage: usize) -> Job {
    let segment = format!("worker-{}-of-{}", worker.index, worker.count);
    let stage_dir = format!("stage-{stage}");
    let mut checkpoint = job.checkpoint.clone();
    checkpoint.directory = checkpoint.directory.join(&segment).join(&stage_dir);
    checkpoint.object_store = checkpoint
        .object_store
        .map(|url| url.join(&segment).join(&stage_dir));
    Job {
        vertices: Vec::new(),
        edges: Vec::new(),
        checkpoint,
        ..job.clone()
    }
}

/// Gives a Kafka source or sink of the job this worker's share.
fn share(vertex: &mut Vertex, worker: Worker) {
    let first = worker.index * vertex.parallelism;
    let readers = worker.count * vertex.parallelism;
    match &mut vertex.kind {
        VertexKind::Source(SourceKind::Kafka(settings)) => {
            settings.share.slice = Some((first, readers));
        }
        VertexKind::Sink(SinkKind::Kafka(settings)) => worker_ids(settings, worker),
        _ => {}
    }
}

/// A sink's transactional ids of this worker: `<prefix>.wI-<subtask>`, one marker topic for
/// all workers.
fn worker_ids(settings: &mut KafkaSinkSettings, worker: Worker) {
    settings.transactional_id_prefix =
        format!("{}.w{}", settings.transactional_id_prefix, worker.index);
}

/// The Kafka connection of the exchange: the first Kafka vertex's (validation refuses none
/// but Kafka sources and sinks, and the exchange needs one cluster all workers reach).
fn connection(job: &Job) -> (String, Vec<(String, String)>) {
    job.vertices
        .iter()
        .find_map(|v| match &v.kind {
            VertexKind::Source(SourceKind::Kafka(s)) => {
                Some((s.bootstrap.clone(), s.properties.clone()))
            }
            VertexKind::Sink(SinkKind::Kafka(s)) => {
                Some((s.bootstrap.clone(), s.properties.clone()))
            }
            _ => None,
        })
        .expect("a job run by workers has Kafka sources (checked)")
}

/// The sink that ends a cut edge in the sending stage.
fn exchange_sink(
    job: &Job,
    worker: Worker,
    edge: &Edge,
    topic: &str,
    from: &Vertex,
    to: &Vertex,
) -> Vertex {
    let topic = topic.to_owned();
    let (bootstrap, properties) = connection(job);
    let mut settings = KafkaSinkSettings {
        bootstrap,
        topic: SinkTopic::Fixed(topic.clone()),
        timestamp: SinkTimestamp::Record,
        delivery: Delivery::ExactlyOnce,
        transactional_id_prefix: topic.clone(),
        marker_topic: format!("{topic}.markers"),
        properties,
        partitioning: SinkPartitioning::KeyGroups(to.max_parallelism),
    };
    worker_ids(&mut settings, worker);
    Vertex {
        name: exchange_name(edge),
        parallelism: from.parallelism,
        max_parallelism: from.max_parallelism,
        kind: VertexKind::Sink(SinkKind::Kafka(settings)),
        watermark: None,
        chain: true,
        line: from.line,
    }
}

/// The source that begins a cut edge in the receiving stage: subtask `j` reads the key groups
/// of `to`'s subtask `j` (over all workers) and forwards them to it.
fn exchange_source(job: &Job, worker: Worker, edge: &Edge, topic: &str, to: &Vertex) -> Vertex {
    let topic = topic.to_owned();
    let (bootstrap, properties) = connection(job);
    let settings = KafkaSourceSettings {
        bootstrap,
        topics: TopicSelection::Names(vec![topic.clone()]),
        start: KafkaStart::Earliest,
        until: KafkaUntil::Never,
        isolation: Isolation::ReadCommitted,
        group: topic,
        discovery_interval: None,
        properties,
        key: KafkaField::Record,
        value: KafkaField::Record,
        timestamp: KafkaField::Record,
        on_error: OnError::Fail,
        share: PartitionShare {
            by: ShareBy::KeyGroups(to.max_parallelism),
            slice: Some((worker.index * to.parallelism, worker.count * to.parallelism)),
        },
    };
    Vertex {
        name: exchange_name(edge),
        parallelism: to.parallelism,
        max_parallelism: to.max_parallelism,
        kind: VertexKind::Source(SourceKind::Kafka(settings)),
        watermark: None,
        chain: true,
        line: to.line,
    }
}

/// Puts a stage's vertices in the job's order (sources first, a vertex after its inputs) and
/// its edges by receiver, then port.
fn order(job: &mut Job) {
    let mut placed: Vec<Vertex> = Vec::with_capacity(job.vertices.len());
    let mut left = std::mem::take(&mut job.vertices);
    // Sources first, each vertex once all its inputs are placed; few vertices, so quadratic.
    left.sort_by_key(|v| !matches!(v.kind, VertexKind::Source(_)));
    while !left.is_empty() {
        let ready = left
            .iter()
            .position(|v| {
                job.edges
                    .iter()
                    .filter(|e| e.to == v.name)
                    .all(|e| placed.iter().any(|p| p.name == e.from))
            })
            .expect("a stage of an acyclic job is acyclic");
        placed.push(left.remove(ready));
    }
    let position = |name: &str| placed.iter().position(|v| v.name == name);
    job.edges.sort_by_key(|e| (position(&e.to), e.port));
    job.vertices = placed;
}

#[cfg(test)]
mod tests;
