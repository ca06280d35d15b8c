//! A live rescale's next job: [`Job::with_parallelism`] changes the parallelism of vertices of
//! a valid job in its graph, then checks the rules the job file's parser checks for those
//! values by calling the same functions, so a rescale accepts exactly the parallelisms a job
//! file would and refuses the others in the parser's words.

use std::collections::BTreeMap;

use super::graph::check_forward;
use super::settings::{check_parallelism, set_max_parallelism};
use super::{check_file_source_parallelism, check_subtasks};
use crate::job::error::Problem;
use crate::job::graph::{Job, ParallelismError, Partitioner, SourceKind, Vertex, VertexKind};

impl Job {
    /// This job with the parallelism of each vertex named in `changes` set to its number,
    /// validated as its job file would be (forward edges, `max_parallelism`, the bounds): what a
    /// live rescale runs next.
    pub fn with_parallelism(
        &self,
        changes: &BTreeMap<String, u32>,
    ) -> Result<Job, ParallelismError> {
        if changes.is_empty() {
            return Err(ParallelismError::Nothing);
        }
        if let Some(vertex) = changes.keys().find(|name| self.vertex(name).is_none()) {
            return Err(ParallelismError::UnknownVertex {
                vertex: vertex.clone(),
                vertices: self.vertices.iter().map(|v| v.name.clone()).collect(),
            });
        }
        if changes
            .iter()
            .all(|(vertex, &p)| self.vertex(vertex).is_some_and(|v| v.parallelism == p))
        {
            return Err(ParallelismError::Unchanged);
        }
        let invalid = |problem: Box<Problem>| ParallelismError::Invalid(problem.to_string());
        // The edges keep their partitioners: a forward edge whose ends no longer match is
        // refused below, where the job file's shorthand (an input without `partition`) would
        // have silently made it a rebalance.
        let mut job = self.clone();
        // The vertices as a job file lists them (sources, operators, sinks; the graph's order
        // within each), so that the first problem found is the one the file would show.
        let mut vertices: Vec<&mut Vertex> = job.vertices.iter_mut().collect();
        vertices.sort_by_key(|vertex| file_rank(vertex));
        for vertex in &mut vertices {
            if let Some(&parallelism) = changes.get(&vertex.name) {
                vertex.parallelism = parallelism;
            }
            check_parallelism(vertex.parallelism, vertex.kind_name(), &vertex.name)
                .map_err(invalid)?;
            if let VertexKind::Source(SourceKind::File { .. }) = vertex.kind {
                check_file_source_parallelism(&vertex.name, vertex.parallelism).map_err(invalid)?;
            }
        }
        set_max_parallelism(job.max_parallelism, &mut vertices).map_err(|(_, p)| invalid(p))?;
        let parallelisms: Vec<u32> = vertices.iter().map(|v| v.parallelism).collect();
        check_subtasks(&parallelisms).map_err(|(_, p)| invalid(p))?;
        let names: Vec<String> = vertices.iter().map(|v| v.name.clone()).collect();
        for to in &names {
            for edge in job.inputs_of(to) {
                if edge.partitioner == Partitioner::Forward {
                    let upstream = job.vertex(&edge.from).expect("an edge joins two vertices");
                    let vertex = job.vertex(to).expect("an edge joins two vertices");
                    check_forward(upstream, vertex).map_err(invalid)?;
                }
            }
        }
        Ok(job)
    }
}

/// Where a vertex of this kind comes in a job file: sources, then operators, then sinks.
fn file_rank(vertex: &Vertex) -> u8 {
    match vertex.kind {
        VertexKind::Source(_) => 0,
        VertexKind::Operator(_) => 1,
        VertexKind::Sink(_) => 2,
    }
}
