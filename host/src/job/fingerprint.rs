//! [`Job::fingerprint`]: a hash of the job graph's shape, stored in checkpoint
//! metadata to tell whether a checkpoint was taken by the same graph.
//!
//! The hash is 64-bit FNV-1a over a canonical encoding, written here rather than
//! taken from `std` (whose `DefaultHasher` may change between releases), so a
//! fingerprint is the same on every platform, run and Weir build. Changing
//! what goes in, or how, changes every fingerprint, so existing checkpoints no
//! longer match their jobs: do it on purpose, bump [`FORMAT`], and update the
//! pinned value in the tests and docs/JOB.md.
//!
//! An edge's side output was added without a new format: it is hashed only when the edge
//! reads one, after a tag no edge's first field can begin with, so every graph without
//! side outputs (every graph before them) keeps its fingerprint and its checkpoints.

use super::graph::{Job, SinkKind, SourceKind, VertexKind};
use crate::checkpoint::metadata::JobIdentity;

/// Names the encoding; part of the hashed bytes.
const FORMAT: &[u8] = b"weir job graph fingerprint v1";

/// Comes before the name of the side output an edge reads. An edge reading the main output
/// is followed by the next edge's `from`, whose length prefix is a vertex name's (at most
/// 64), or by nothing: never this, so the encoding stays unambiguous.
const SIDE_OUTPUT_TAG: u64 = u64::MAX;

/// 64-bit FNV-1a.
struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;

    fn new() -> Self {
        Fnv1a(Self::OFFSET_BASIS)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.0 ^= u64::from(byte);
            self.0 = self.0.wrapping_mul(Self::PRIME);
        }
    }

    /// A length-prefixed string, so that `("ab", "c")` and `("a", "bc")` differ.
    fn str(&mut self, text: &str) {
        self.u64(text.len() as u64);
        self.bytes(text.as_bytes());
    }

    fn u64(&mut self, value: u64) {
        self.bytes(&value.to_le_bytes());
    }
}

impl Job {
    /// What a checkpoint of this job records of it: name, fingerprint and every
    /// vertex's parallelism and key groups (the generation is the run's, left 0 here).
    pub fn identity(&self) -> JobIdentity {
        JobIdentity {
            name: self.name.clone(),
            fingerprint: self.fingerprint(),
            parallelism: self
                .vertices
                .iter()
                .map(|v| (v.name.clone(), v.parallelism))
                .collect(),
            max_parallelism: self
                .vertices
                .iter()
                .map(|v| (v.name.clone(), v.max_parallelism))
                .collect(),
            // The run claims its generation on the storage and sets it.
            generation: Default::default(),
        }
    }

    /// A stable hash of the graph's shape: every vertex's name, kind (with the
    /// source or sink type) and parallelism, and every edge's ends, port,
    /// partitioner and side output — nothing else (not module paths, configs,
    /// limits, watermark strategies or checkpoint settings, which may change
    /// between a checkpoint and its restore). Independent of the order of tables
    /// in the job file.
    pub fn fingerprint(&self) -> u64 {
        let mut hash = Fnv1a::new();
        hash.bytes(FORMAT);
        let mut vertices: Vec<_> = self.vertices.iter().collect();
        vertices.sort_by(|a, b| a.name.cmp(&b.name));
        hash.u64(vertices.len() as u64);
        for vertex in vertices {
            hash.str(&vertex.name);
            hash.str(match &vertex.kind {
                VertexKind::Source(SourceKind::File { .. }) => "source/file",
                VertexKind::Source(SourceKind::Generator(_)) => "source/generator",
                VertexKind::Source(SourceKind::Kafka(_)) => "source/kafka",
                VertexKind::Operator(_) => "operator",
                VertexKind::Sink(SinkKind::File { .. }) => "sink/file",
                VertexKind::Sink(SinkKind::Kafka(_)) => "sink/kafka",
                VertexKind::Sink(SinkKind::Stdout) => "sink/stdout",
                VertexKind::Sink(SinkKind::Blackhole) => "sink/blackhole",
            });
            hash.u64(u64::from(vertex.parallelism));
        }
        let mut edges: Vec<_> = self.edges.iter().collect();
        edges.sort_by(|a, b| (&a.to, a.port).cmp(&(&b.to, b.port)));
        hash.u64(edges.len() as u64);
        for edge in edges {
            hash.str(&edge.from);
            hash.str(&edge.to);
            hash.u64(u64::from(edge.port));
            hash.str(edge.partitioner.name());
            if let Some(output) = &edge.output {
                hash.u64(SIDE_OUTPUT_TAG);
                hash.str(output);
            }
        }
        hash.0
    }
}

#[cfg(test)]
mod tests {
    use super::Fnv1a;

    #[test]
    fn fnv1a_matches_published_test_vectors() {
        let hash = |text: &str| {
            let mut h = Fnv1a::new();
            h.bytes(text.as_bytes());
            h.0
        };
        assert_eq!(hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash("a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash("foobar"), 0x8594_4171_f739_67e8);
    }
}
