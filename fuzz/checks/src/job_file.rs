//! The job-file parser: TOML text to a validated [`Job`] (`Job::from_str`, which
//! `Job::from_file` and `weir run` use too).
//!
//! The input is read as UTF-8, invalid sequences replaced, as a job file would have to be.
//!
//! Properties, for any text:
//! - parsing returns, never panics;
//! - an error names the file, and points at a line of the text;
//! - a job that parses, written back with [`Job::to_toml`], parses again to the same job
//!   (apart from the line numbers it records) with the same fingerprint, and writing that
//!   one gives the same text.

use weir::job::{Job, JobError, VertexKind};

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
        Ok(job) => check_round_trip(&text, job),
        Err(error) => check_error(&text, &error),
    }
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
