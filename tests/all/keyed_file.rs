//! A keyed job straight from a jsonl file, no helper operator: the file source reads the key
//! from a JSON pointer and skips malformed lines; `count` counts per key. The process is
//! killed with SIGKILL right after a checkpoint completes (the `before-commit` kill point)
//! while it follows the first half of the file; the second half is appended and the job
//! restored with `--restore latest`, so the source resumes at its checkpointed position in
//! the middle of the final file. The committed output must be the per-key running counts of
//! every well-formed line, each exactly once, computed here independently.

use std::fs;

use crate::support::{
    JobFile, Sandbox, Weir, assert_same_output, checkpointed, committed_lines, run_cli,
    running_counts,
};

/// Lines in the file, of which every 37th is malformed.
const LINES: usize = 3_000;

/// Line `n` (from 1) of the input: a click by one of 23 users, or one of three kinds of
/// malformed line.
fn line(n: usize) -> String {
    match (n % 37, n % 3) {
        (0, 0) => "{\"user\": \"cut off".to_owned(),
        (0, 1) => format!("{{\"page\": \"/p{n}\"}}"),
        (0, _) => String::new(),
        _ => format!(
            "{{\"user\": {{\"id\": \"u{}\"}}, \"page\": \"/p{}\", \"at\": {n}}}",
            n * 7 % 23,
            n % 5
        ),
    }
}

/// What `count` must commit: the [`running_counts`] of the users of the well-formed lines.
fn expected(lines: &[String]) -> Vec<String> {
    running_counts(lines.iter().filter_map(|line| {
        let doc = serde_json::from_str::<serde_json::Value>(line).ok()?;
        Some(doc.pointer("/user/id")?.as_str()?.to_owned())
    }))
}

fn job(sandbox: &Sandbox, follow: bool) -> JobFile {
    let input = sandbox.join("clicks.jsonl");
    let job = JobFile::new("keyed-file")
        .file_source_with(
            "clicks",
            &input,
            follow,
            "format = \"jsonl\"\nkey = \"/user/id\"\nvalue = \"/page\"\ntimestamp = \"/at\"\n\
             on_error = \"skip\"",
        )
        .operator(
            "count",
            weir_tests::guests::COUNT,
            2,
            None,
            ("clicks", "key-hash"),
        )
        .file_sink("out", &sandbox.out_dir(), 2, ("count", "forward"));
    checkpointed(job, sandbox, "50ms", 3).checkpoint("min_pause", "0ms")
}

#[test]
fn a_keyed_jsonl_job_killed_after_a_checkpoint_resumes_mid_file_exactly_once() {
    let sandbox = Sandbox::new("keyed-file");
    let lines: Vec<String> = (1..=LINES).map(line).collect();
    let half = LINES / 2;
    let text = |range: &[String]| range.iter().map(|l| format!("{l}\n")).collect::<String>();
    let input = sandbox.join("clicks.jsonl");
    fs::write(&input, text(&lines[..half])).unwrap();

    // Following the first half, killed right after its third checkpoint completes.
    job(&sandbox, true).write(&sandbox.job_path());
    let ended = Weir::killed_at(&sandbox, "before-commit:3");
    assert!(
        ended.stderr.contains("skipped malformed line 37 of"),
        "the first malformed line is named with its number:\n{}",
        ended.stderr
    );

    // The rest of the file, read from the restored position to its end.
    let mut whole = text(&lines[..half]);
    whole.push_str(&text(&lines[half..]));
    fs::write(&input, &whole).unwrap();
    job(&sandbox, false).write(&sandbox.job_path());
    let ended = run_cli(
        &sandbox.job_path(),
        &["--restore", "latest"],
        &sandbox.join("restored.log"),
    );
    ended.assert_code(0, "the restored run");
    assert!(
        ended.stderr.contains("restor") && !ended.stderr.contains("skipped malformed line 37 of"),
        "the restored run resumes after the lines the first run read, not from the start:\n{}",
        ended.stderr
    );
    let last_bad = (1..=LINES).rev().find(|n| n % 37 == 0).unwrap();
    assert!(
        ended
            .stderr
            .contains(&format!("the last line {last_bad}: "))
            || ended
                .stderr
                .contains(&format!("skipped malformed line {last_bad} of")),
        "the restored run names the file's last malformed line, {last_bad}, by its number:\n{}",
        ended.stderr
    );
    let skip_lines = ended.stderr.matches("file source: skipped").count();
    assert!(
        (2..=12).contains(&skip_lines),
        "about 40 malformed lines make ten log lines, a notice and a summary, found \
         {skip_lines}:\n{}",
        ended.stderr
    );
    assert_same_output(
        &committed_lines(&sandbox.out_dir()),
        &expected(&lines),
        "per-key counts of every well-formed line, once",
    );
}
