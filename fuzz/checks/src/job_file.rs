//! The job-file parser: TOML text to a validated [`Job`] (`Job::from_str`, which
//! `Job::from_file` and `weir run` use too).
//!
//! The input is read as UTF-8, invalid sequences replaced, as a job file would have to be.
//!
//! Properties, for any text:
//! - parsing returns, never panics;
//! - a job that parses asks for nothing the engine cannot give (docs/JOB.md, "Bounds"): at
//!   most `MAX_PARALLELISM` subtasks per vertex and `MAX_SUBTASKS` in all, generator values of
//!   at most `MAX_VALUE_SIZE`, durations of at most `MAX_DURATION`, guest sizes of at most
//!   `MAX_GUEST_BYTES`, generator disorder of at most `MAX_GENERATOR_DISORDER`, watermark
//!   strategies on sources only with a non-zero interval — the values `weir run` once aborted
//!   on (exit 134) are refused; integer
//!   generators have `min <= max`, csv columns are at most `MAX_CSV_COLUMN` and JSON pointers
//!   start with `/`;
//! - an error names the file, and points at a line of the text;
//! - a job that parses, written back with [`Job::to_toml`], parses again to the same job
//!   (apart from the line numbers it records) with the same fingerprint, and writing that
//!   one gives the same text.

use weir::job::{
    FileFormat, GeneratorSettings, GeneratorValues, Job, JobError, MAX_CSV_COLUMN, MAX_DURATION,
    MAX_GENERATOR_COUNT, MAX_GENERATOR_DISORDER, MAX_GENERATOR_RATE, MAX_GUEST_BYTES,
    MAX_PARALLELISM, MAX_SUBTASKS, MAX_VALUE_SIZE, SourceKind, VertexKind,
};

/// The folder relative paths in the job are resolved against; nothing is read from it.
const BASE_DIR: &str = "/fuzz/jobs";
/// How errors name the job file.
const FILE: &str = "fuzz.toml";
/// How errors name the job file written back by [`Job::to_toml`].
const REWRITTEN: &str = "rewritten.toml";

/// Parses `bytes` as a job file; panics when a property fails.
pub fn check(bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    match Job::from_str(&text, BASE_DIR, FILE) {
        Ok(job) => {
            check_bounds(&text, &job);
            check_round_trip(&text, job);
        }
        Err(error) => check_error(&text, &error),
    }
}

/// An accepted job stays within every bound validation promises.
fn check_bounds(text: &str, job: &Job) {
    let context = || format!("accepted beyond a bound:\n--- input\n{text}");
    let mut subtasks = 0u64;
    for vertex in &job.vertices {
        assert!(vertex.parallelism <= MAX_PARALLELISM, "{}", context());
        subtasks += u64::from(vertex.parallelism);
        if let VertexKind::Source(SourceKind::Generator(GeneratorSettings {
            value_size,
            count,
            rate,
            disorder,
            ..
        })) = &vertex.kind
        {
            assert!(*value_size <= MAX_VALUE_SIZE, "{}", context());
            assert!(*disorder <= MAX_GENERATOR_DISORDER, "{}", context());
            assert!(
                count.is_none_or(|c| c <= MAX_GENERATOR_COUNT),
                "{}",
                context()
            );
            assert!(
                rate.is_none_or(|r| r <= MAX_GENERATOR_RATE),
                "{}",
                context()
            );
        }
        if let VertexKind::Source(SourceKind::Generator(GeneratorSettings {
            values: GeneratorValues::Integers { min, max },
            ..
        })) = &vertex.kind
        {
            assert!(min <= max, "{}", context());
        }
        if let VertexKind::Source(SourceKind::File { format, .. }) = &vertex.kind {
            match format {
                FileFormat::Lines => {}
                FileFormat::Jsonl(fields) => {
                    for pointer in [&fields.key, &fields.value, &fields.timestamp]
                        .into_iter()
                        .flatten()
                    {
                        assert!(pointer.starts_with('/'), "{}", context());
                    }
                }
                FileFormat::Csv { fields, .. } => {
                    for column in [fields.key, fields.value, fields.timestamp]
                        .into_iter()
                        .flatten()
                    {
                        assert!(column as u64 <= MAX_CSV_COLUMN, "{}", context());
                    }
                }
            }
        }
        if let VertexKind::Operator(operator) = &vertex.kind {
            check_limits(&operator.limits, &context);
        }
        if let Some(watermark) = &vertex.watermark {
            assert!(
                matches!(vertex.kind, VertexKind::Source(_)),
                "{}",
                context()
            );
            for duration in [watermark.out_of_orderness, watermark.interval]
                .into_iter()
                .chain(watermark.idle_timeout)
            {
                assert!(duration <= MAX_DURATION, "{}", context());
            }
            assert!(!watermark.interval.is_zero(), "{}", context());
        }
    }
    assert!(subtasks <= u64::from(MAX_SUBTASKS), "{}", context());
    check_limits(&job.limits, &context);
    let checkpoint = &job.checkpoint;
    for duration in [checkpoint.min_pause, checkpoint.timeout]
        .into_iter()
        .chain(checkpoint.interval)
    {
        assert!(duration <= MAX_DURATION, "{}", context());
    }
}

/// Guest limits within their bounds.
fn check_limits(limits: &weir::wasm::GuestLimits, context: &dyn Fn() -> String) {
    for bytes in [
        limits.max_memory_bytes,
        limits.max_output_bytes,
        limits.max_state_bytes,
        limits.max_timer_bytes,
    ] {
        assert!(bytes as u64 <= MAX_GUEST_BYTES, "{}", context());
    }
    assert!(limits.call_timeout <= MAX_DURATION, "{}", context());
}

/// A job written back as TOML reads back as the same job.
fn check_round_trip(text: &str, job: Job) {
    let _ = job.fingerprint();
    let written = job.to_toml();
    let reread = Job::from_str(&written, &job.base_dir, REWRITTEN).unwrap_or_else(|error| {
        panic!("a valid job, written back, does not parse: {error}\n--- input\n{text}\n--- written\n{written}")
    });
    assert_eq!(
        reread.fingerprint(),
        job.fingerprint(),
        "the fingerprint changed through to_toml\n--- input\n{text}\n--- written\n{written}"
    );
    assert_eq!(
        reread.to_toml(),
        written,
        "writing a job back is not deterministic"
    );
    let expected = Job {
        file: REWRITTEN.into(),
        ..job
    };
    assert!(
        without_lines(reread) == without_lines(expected),
        "the job changed through to_toml\n--- input\n{text}\n--- written\n{written}"
    );
}

/// The job with every recorded line number zeroed: they depend on the text's layout.
fn without_lines(mut job: Job) -> Job {
    for vertex in &mut job.vertices {
        vertex.line = 0;
        if let VertexKind::Operator(operator) = &mut vertex.kind {
            operator.module_line = 0;
        }
    }
    job
}

/// An error names the file and a position inside the text.
fn check_error(text: &str, error: &JobError) {
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("{FILE}:")),
        "error does not name the file: {message:?}"
    );
    let location = error
        .location()
        .unwrap_or_else(|| panic!("a parse error without a location: {message:?}"));
    let lines = text.split('\n').count();
    assert!(
        (1..=lines).contains(&location.line) && location.column >= 1,
        "error at {location} but the text has {lines} lines: {message:?}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_a_minimal_job_and_garbage() {
        check(
            b"name = \"j\"\n[[source]]\nname = \"s\"\ntype = \"generator\"\n\
              [[sink]]\nname = \"out\"\ntype = \"stdout\"\ninputs = [\"s\"]\n",
        );
        check(b"");
        check(b"\xff\xfe[[[");
    }
}
