//! The rules of the job as a graph, once each vertex is valid on its own: every input names a
//! vertex that has an output (and, for a side output, an operator), forward edges join equal
//! parallelisms, no cycle (the vertices are put in topological order), no two paths of the job
//! meet, and an exactly-once Kafka sink has exactly-once checkpoints to commit with.

use std::collections::HashMap;

use toml::Spanned;

use super::{Draft, DraftEdge, Validator, span_of};
use crate::checkpoint::config::{CheckpointConfig, CheckpointMode};
use crate::job::error::PathUse;
use crate::job::error::{JobError, Problem};
use crate::job::graph::{Partitioner, SinkKind, Vertex, VertexKind};
use crate::job::paths;
use crate::job::spec::{InputSpec, JobSpec};

/// The longest side output name, in bytes of UTF-8: what a guest may pass to `emit_to`
/// (docs/ABI.md §15).
const MAX_SIDE_OUTPUT_NAME: usize = 255;
/// The partitioners, for messages.
const PARTITIONERS: &str = "\"forward\", \"rebalance\", \"key-hash\" or \"broadcast\"";

/// Refuses a forward edge from `upstream` to `vertex` unless both have the same parallelism:
/// subtask *i* sends to subtask *i*.
pub(super) fn check_forward(upstream: &Vertex, vertex: &Vertex) -> Result<(), Box<Problem>> {
    if upstream.parallelism == vertex.parallelism {
        return Ok(());
    }
    Err(Box::new(Problem::ForwardParallelism {
        from: upstream.name.clone(),
        from_parallelism: upstream.parallelism,
        to: vertex.name.clone(),
        to_parallelism: vertex.parallelism,
    }))
}

impl Validator<'_> {
    /// Refuses an exactly-once Kafka sink in a job whose checkpoints could not make its output
    /// exactly-once: it commits when a checkpoint completes, so with checkpoints off it would
    /// never commit, and with at-least-once checkpoints the job itself may process a record
    /// twice after a restore.
    pub(super) fn check_exactly_once_sinks(
        &self,
        spec: &JobSpec,
        drafts: &[Draft<'_>],
        checkpoint: &CheckpointConfig,
    ) -> Result<(), JobError> {
        let reason = if checkpoint.interval.is_none() {
            "it commits its output when a checkpoint completes, and checkpoints are off: set \
             `checkpoint.interval` (e.g. \"1s\")"
        } else if checkpoint.mode == CheckpointMode::AtLeastOnce {
            "`checkpoint.mode = \"at-least-once\"` lets the job process a record twice after a \
             restore, so its output cannot be exactly-once: set the mode to \"exactly-once\""
        } else {
            return Ok(());
        };
        for draft in drafts {
            if let VertexKind::Sink(SinkKind::Kafka(kafka)) = &draft.vertex.kind
                && kafka.delivery == crate::job::kafka::Delivery::ExactlyOnce
            {
                let span = spec
                    .sinks
                    .iter()
                    .find(|s| s.name.get_ref() == &draft.vertex.name)
                    .and_then(|s| span_of(&s.delivery))
                    .unwrap_or(draft.name_span.clone());
                return Err(self.error(
                    span,
                    Problem::ExactlyOnceSink {
                        sink: draft.vertex.name.clone(),
                        reason,
                    },
                ));
            }
        }
        Ok(())
    }

    /// Refuses file sinks whose directories are equal or nested, a file sink on, in or around
    /// the checkpoint directory, and a file source reading inside a file sink's directory,
    /// comparing paths lexically (see [`paths`]).
    pub(super) fn check_paths(
        &self,
        spec: &JobSpec,
        drafts: &[Draft<'_>],
        checkpoint: &CheckpointConfig,
    ) -> Result<(), JobError> {
        let checkpoint_span = spec.checkpoint.as_ref().and_then(|c| span_of(&c.directory));
        let mut uses = vec![(
            PathUse::CheckpointDirectory,
            paths::lexical(&checkpoint.directory),
        )];
        let mut spans = vec![checkpoint_span];
        let path_spans = spec
            .sources
            .iter()
            .map(|s| span_of(&s.path))
            .chain(spec.operators.iter().map(|_| None))
            .chain(spec.sinks.iter().map(|s| span_of(&s.path)));
        for (draft, span) in drafts.iter().zip(path_spans) {
            let vertex = &draft.vertex;
            let Some((use_, path)) = PathUse::of(vertex) else {
                continue;
            };
            uses.push((use_, paths::lexical(path)));
            spans.push(span);
        }
        let Some((i, j, problem)) = paths::first_conflict(&uses) else {
            return Ok(());
        };
        let span = spans[j]
            .clone()
            .or_else(|| spans[i].clone())
            .unwrap_or(spec.name.span());
        Err(self.error(span, problem))
    }

    /// The edges of every operator and sink, by the order of their `inputs`.
    pub(super) fn edges(&self, drafts: &[Draft<'_>]) -> Result<Vec<DraftEdge>, JobError> {
        let index: HashMap<&str, usize> = drafts
            .iter()
            .enumerate()
            .map(|(i, d)| (d.vertex.name.as_str(), i))
            .collect();
        let known = || {
            drafts
                .iter()
                .filter(|d| !matches!(d.vertex.kind, VertexKind::Sink(_)))
                .map(|d| d.vertex.name.clone())
                .collect::<Vec<_>>()
        };
        let mut edges = Vec::new();
        for (to, draft) in drafts.iter().enumerate() {
            let vertex = &draft.vertex;
            if matches!(vertex.kind, VertexKind::Source(_)) {
                continue;
            }
            let kind = vertex.kind_name();
            let inputs = match draft.inputs {
                Some(inputs) if !inputs.get_ref().is_empty() => inputs.get_ref(),
                Some(inputs) => {
                    return Err(self.error(
                        inputs.span(),
                        Problem::NoInputs {
                            kind,
                            vertex: vertex.name.clone(),
                        },
                    ));
                }
                None => {
                    return Err(self.error(
                        draft.name_span.clone(),
                        Problem::NoInputs {
                            kind,
                            vertex: vertex.name.clone(),
                        },
                    ));
                }
            };
            let first_edge = edges.len();
            for (port, input) in inputs.iter().enumerate() {
                let (from_name, span, partition, output) = match input.get_ref() {
                    InputSpec::Name(from) => (from.as_str(), input.span(), None, None),
                    InputSpec::Edge {
                        from,
                        partition,
                        output,
                    } => (
                        from.get_ref().as_str(),
                        from.span(),
                        partition.as_ref(),
                        output.as_ref(),
                    ),
                };
                let Some(&from) = index.get(from_name) else {
                    let problem = Problem::UnknownInput {
                        kind,
                        vertex: vertex.name.clone(),
                        input: from_name.to_owned(),
                        known: known(),
                    };
                    return Err(self.error(span, problem));
                };
                let upstream = &drafts[from].vertex;
                if matches!(upstream.kind, VertexKind::Sink(_)) {
                    let problem = Problem::InputFromSink {
                        kind,
                        vertex: vertex.name.clone(),
                        sink: from_name.to_owned(),
                    };
                    return Err(self.error(span, problem));
                }
                let output = match output {
                    Some(output) => Some(self.side_output(output, upstream, kind, vertex)?),
                    None => None,
                };
                if edges[first_edge..]
                    .iter()
                    .any(|e: &DraftEdge| e.from == from && e.output == output)
                {
                    let problem = Problem::DuplicateInput {
                        kind,
                        vertex: vertex.name.clone(),
                        input: from_name.to_owned(),
                        output,
                    };
                    return Err(self.error(span, problem));
                }
                let same_parallelism = upstream.parallelism == vertex.parallelism;
                let partitioner = match partition {
                    None if same_parallelism => Partitioner::Forward,
                    None => Partitioner::Rebalance,
                    Some(partition) => {
                        let Some(partitioner) = Partitioner::from_name(partition.get_ref()) else {
                            let key = format!(
                                "`partition` of input \"{from_name}\" of {kind} \"{}\"",
                                vertex.name
                            );
                            return Err(self.bad_value(
                                partition.span(),
                                key,
                                format!("{:?}", partition.get_ref()),
                                PARTITIONERS,
                            ));
                        };
                        if partitioner == Partitioner::Forward
                            && let Err(problem) = check_forward(upstream, vertex)
                        {
                            return Err(self.error(partition.span(), *problem));
                        }
                        partitioner
                    }
                };
                let port = u32::try_from(port).expect("fewer than 2^32 inputs");
                edges.push(DraftEdge {
                    from,
                    to,
                    port,
                    partitioner,
                    output,
                    span,
                });
            }
        }
        Ok(edges)
    }

    /// The `output` of an input of `vertex` (a `kind`) from `upstream`: a side output of an
    /// operator, named as its guest names it (docs/ABI.md §15).
    pub(super) fn side_output(
        &self,
        output: &Spanned<String>,
        upstream: &Vertex,
        kind: &'static str,
        vertex: &Vertex,
    ) -> Result<String, JobError> {
        let name = output.get_ref();
        if matches!(upstream.kind, VertexKind::Source(_)) {
            let problem = Problem::SideOutputOfSource {
                kind,
                vertex: vertex.name.clone(),
                source_name: upstream.name.clone(),
                output: name.clone(),
            };
            return Err(self.error(output.span(), problem));
        }
        if !(1..=MAX_SIDE_OUTPUT_NAME).contains(&name.len()) {
            let found = if name.is_empty() {
                "\"\"".to_owned()
            } else {
                format!("{name:?} ({} bytes)", name.len())
            };
            let key = format!(
                "`output` of input \"{}\" of {kind} \"{}\"",
                upstream.name, vertex.name
            );
            return Err(self.bad_value(
                output.span(),
                key,
                found,
                format!(
                    "the name of a side output of \"{}\", 1 to {MAX_SIDE_OUTPUT_NAME} bytes of \
                     UTF-8, as its guest passes it to `emit_to` (docs/ABI.md §15)",
                    upstream.name
                ),
            ));
        }
        Ok(name.clone())
    }

    /// The vertices in topological order (Kahn's algorithm, ties in file
    /// order), or the first cycle found.
    pub(super) fn topological_order(
        &self,
        drafts: &[Draft<'_>],
        edges: &[DraftEdge],
    ) -> Result<Vec<usize>, JobError> {
        let mut in_degree = vec![0usize; drafts.len()];
        for edge in edges {
            in_degree[edge.to] += 1;
        }
        let mut placed = vec![false; drafts.len()];
        let mut order = Vec::with_capacity(drafts.len());
        while let Some(next) = (0..drafts.len()).find(|&i| !placed[i] && in_degree[i] == 0) {
            placed[next] = true;
            order.push(next);
            for edge in edges.iter().filter(|e| e.from == next) {
                in_degree[edge.to] -= 1;
            }
        }
        if order.len() == drafts.len() {
            return Ok(order);
        }
        // Every vertex left has an input from another vertex left: walking
        // inputs backwards from the first one must come round to a vertex
        // already seen, which closes a cycle.
        let start = (0..drafts.len())
            .find(|&i| !placed[i])
            .expect("a vertex is left");
        let mut walk = vec![start];
        let cycle_start = loop {
            let current = *walk.last().expect("the walk is never empty");
            let previous = edges
                .iter()
                .find(|e| e.to == current && !placed[e.from])
                .expect("a vertex left has an input left")
                .from;
            if let Some(at) = walk.iter().position(|&v| v == previous) {
                break at;
            }
            walk.push(previous);
        };
        // `walk[cycle_start..]` follows edges backwards; turn it to flow order
        // and begin at the vertex written first in the file.
        let mut cycle: Vec<usize> = walk[cycle_start..].iter().rev().copied().collect();
        let first = cycle
            .iter()
            .enumerate()
            .min_by_key(|(_, v)| **v)
            .map(|(i, _)| i)
            .unwrap_or(0);
        cycle.rotate_left(first);
        let closing = edges
            .iter()
            .find(|e| e.to == cycle[0] && e.from == *cycle.last().expect("a cycle is never empty"))
            .expect("consecutive vertices of the cycle are joined by an edge");
        let mut names: Vec<String> = cycle
            .iter()
            .map(|&v| drafts[v].vertex.name.clone())
            .collect();
        names.push(names[0].clone());
        Err(self.error(closing.span.clone(), Problem::Cycle { cycle: names }))
    }
}
