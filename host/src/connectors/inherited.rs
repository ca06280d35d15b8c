//! What a sink subtask restores after a rescale: the states of the old subtasks it inherits.
//!
//! Why a module of its own: the exactly-once sinks (file and Kafka) rescale by one rule, so
//! that rule and its byte layout are written down once. A sink's state after a commit holds
//! only what an old subtask pre-committed and has not yet committed; it cannot be split, but
//! any new subtask can finish it, under the old subtask's names (its part files, its
//! transactional id). So new subtask `j` of `p` inherits every old subtask `i` with
//! `i mod p == j` — an old subtask goes to exactly one new one, and at the same parallelism
//! each inherits itself — and finishes their pending output before its own.

use crate::dataflow::error::TaskError;

/// The states of the old subtasks a new one inherits:
///
/// ```text
/// 8      magic "\xFFINHERIT"
/// 4      the old parallelism, u32
/// 4      n, u32; then n times: the old subtask u32, its state's length u32, its state
/// ```
/// Little-endian. A sink's plain state must not start with this magic (the file sink's starts
/// with its next part number, a `u64` far below it; the Kafka sink's with `WKS1` or `WKS2`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Inherited {
    /// How many subtasks the sink had when the states were taken.
    pub parallelism: u32,
    /// The old subtasks inherited, ascending, each with its state (empty if it had none).
    pub states: Vec<(u32, Vec<u8>)>,
}

/// The magic of an [`Inherited`] state.
const MAGIC: [u8; 8] = *b"\xffINHERIT";

impl Inherited {
    /// The state, as [`Inherited::decode`] reads it.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&self.parallelism.to_le_bytes());
        out.extend_from_slice(&(self.states.len() as u32).to_le_bytes());
        for (subtask, state) in &self.states {
            out.extend_from_slice(&subtask.to_le_bytes());
            out.extend_from_slice(&(state.len() as u32).to_le_bytes());
            out.extend_from_slice(state);
        }
        out
    }

    /// The inherited states in `bytes`, or `None` for a plain state of `connector` (which the
    /// error names if the bytes are cut or damaged).
    pub(crate) fn decode(bytes: &[u8], connector: &str) -> Result<Option<Inherited>, TaskError> {
        let Some(mut rest) = bytes.strip_prefix(&MAGIC) else {
            return Ok(None);
        };
        let bad = || {
            TaskError::Restore(format!(
                "{connector}: the state a rescale handed it is malformed (cut or damaged); \
                 restore another checkpoint"
            ))
        };
        let u32_next = |rest: &mut &[u8]| -> Result<u32, TaskError> {
            let (head, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
            *rest = tail;
            Ok(u32::from_le_bytes(*head))
        };
        let parallelism = u32_next(&mut rest)?;
        let n = u32_next(&mut rest)?;
        let mut states = Vec::new();
        for _ in 0..n {
            let subtask = u32_next(&mut rest)?;
            let len = u32_next(&mut rest)? as usize;
            let (state, tail) = rest.split_at_checked(len).ok_or_else(bad)?;
            states.push((subtask, state.to_vec()));
            rest = tail;
        }
        if !rest.is_empty() {
            return Err(bad());
        }
        Ok(Some(Inherited {
            parallelism,
            states,
        }))
    }
}

/// [`rescale_states`] as a sink's [`RescaleRule`](super::connector::RescaleRule): it never
/// fails.
pub(crate) fn rescale_rule(old: &[&[u8]], parallelism: u32) -> Result<Vec<Vec<u8>>, String> {
    Ok(rescale_states(old, parallelism))
}

/// The states of a sink's `parallelism` new subtasks, from its old subtasks' states (one per
/// old subtask, in order): new subtask `j` inherits every old `i` with `i mod parallelism == j`.
pub(crate) fn rescale_states(old: &[&[u8]], parallelism: u32) -> Vec<Vec<u8>> {
    let old_parallelism = u32::try_from(old.len()).expect("at most 256 subtasks");
    (0..parallelism)
        .map(|j| {
            Inherited {
                parallelism: old_parallelism,
                states: (0..old_parallelism)
                    .zip(old)
                    .filter(|(i, _)| i % parallelism == j)
                    .map(|(i, state)| (i, state.to_vec()))
                    .collect(),
            }
            .encode()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_old_subtask_goes_to_one_new_one() {
        let old: Vec<Vec<u8>> = (0..5u8).map(|i| vec![i; usize::from(i)]).collect();
        let old: Vec<&[u8]> = old.iter().map(Vec::as_slice).collect();
        for parallelism in 1..8 {
            let new = rescale_states(&old, parallelism);
            assert_eq!(new.len(), parallelism as usize);
            let mut seen = Vec::new();
            for (j, state) in (0..).zip(&new) {
                let inherited = Inherited::decode(state, "sink").unwrap().unwrap();
                assert_eq!(inherited.parallelism, 5);
                for (i, state) in inherited.states {
                    assert_eq!(i % parallelism, j);
                    assert_eq!(state, old[i as usize]);
                    seen.push(i);
                }
            }
            seen.sort_unstable();
            assert_eq!(seen, [0, 1, 2, 3, 4], "at parallelism {parallelism}");
        }
    }

    #[test]
    fn a_plain_state_is_not_inherited_and_a_cut_one_is_refused() {
        assert_eq!(Inherited::decode(b"WKS1....", "sink").unwrap(), None);
        let state = Inherited {
            parallelism: 2,
            states: vec![(1, vec![0; 12])],
        }
        .encode();
        assert!(Inherited::decode(&state, "sink").unwrap().is_some());
        for cut in MAGIC.len()..state.len() {
            let error = Inherited::decode(&state[..cut], "kafka sink \"out\"").unwrap_err();
            assert!(error.to_string().contains("kafka sink \"out\""), "{error}");
        }
    }
}
