//! `weir checkpoints`: the checkpoint and savepoint history of a job on disk — list it,
//! inspect one, verify every file. The library (`weir::tools::catalog`) reads and checks;
//! this module parses arguments, renders the reports as tables or JSON, and sets the exit code.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context as _;
use serde::Serialize;
use weir::tools::catalog::{
    self, Catalog, CatalogEntry, CatalogSource, EntryStatus, FileProblem, Inspection, OperatorSize,
    SourceKind, Verdict, VerifyReport,
};

use crate::{EXIT_BAD_INPUT, human};

/// Exit code of `inspect` and `verify`: a checkpoint has a problem.
const EXIT_PROBLEM: u8 = 1;

/// List a job's checkpoints and savepoints, inspect one, or verify them all (see
/// docs/TOOLS.md).
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(crate) struct CheckpointsArgs {
    #[command(subcommand)]
    command: Option<CheckpointsCommand>,
    /// The job's checkpoint directory, a savepoint directory, or the job file (.toml).
    #[arg(value_name = "DIR", required = true)]
    dir: Option<PathBuf>,
    /// Print the list as JSON.
    #[arg(long)]
    json: bool,
}

#[derive(clap::Subcommand)]
enum CheckpointsCommand {
    /// Show one checkpoint or savepoint with every task's state file, each verified.
    ///
    /// Exit code 0: every file verifies; 1: a problem (incomplete, corrupt); 2: not a checkpoint
    /// or unreadable.
    Inspect {
        /// The checkpoint or savepoint directory (chk-N/, sp-N/), or its _metadata file.
        #[arg(value_name = "PATH")]
        path: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Verify every file of every checkpoint and savepoint: metadata, lengths and checksums.
    ///
    /// Exit code 0: all good (incomplete checkpoints are only warnings); 1: a problem; 2: bad
    /// arguments or an unreadable directory.
    Verify {
        /// The job's checkpoint directory, a savepoint directory, or the job file (.toml).
        #[arg(value_name = "DIR")]
        dir: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `weir checkpoints …` and maps the outcome to an exit code.
pub(crate) fn run(args: CheckpointsArgs) -> ExitCode {
    let outcome = match (args.command, args.dir) {
        (Some(CheckpointsCommand::Inspect { path, json }), _) => inspect(&path, json),
        (Some(CheckpointsCommand::Verify { dir, json }), _) => verify(&dir, json),
        (None, Some(dir)) => list(&dir, args.json),
        // clap requires DIR when there is no subcommand.
        (None, None) => Err(anyhow::anyhow!(
            "missing DIR: pass the job's checkpoint directory or its job file"
        )),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

/// Prints `report` as JSON under `--json`, else as `render` writes it for people; the exit code
/// is [`EXIT_PROBLEM`] unless the report is `ok`.
fn print_report<T: Serialize>(
    report: &T,
    json: bool,
    render: fn(&T) -> String,
    ok: bool,
) -> anyhow::Result<ExitCode> {
    if json {
        let json =
            serde_json::to_string_pretty(report).context("cannot write the report as JSON")?;
        println!("{json}");
    } else {
        print!("{}", render(report));
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_PROBLEM)
    })
}

// ---------------------------------------------------------------------------------------------
// weir checkpoints DIR

fn list(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let catalog = catalog::list(dir)
        .with_context(|| format!("cannot list the checkpoints of {}", dir.display()))?;
    print_report(&catalog, json, render_catalog, true)
}

/// Where the checkpoints were looked for, in words.
fn describe_dirs(source: &CatalogSource) -> String {
    match source.kind {
        SourceKind::JobFile => format!(
            "job `{}` ({}): checkpoints in {}, savepoints in {}",
            source.job_name.as_deref().unwrap_or("?"),
            source.given.display(),
            source.checkpoint_dir.display(),
            source.savepoint_dir.display()
        ),
        SourceKind::CheckpointDirectory => format!(
            "checkpoints in {}, savepoints in {}",
            source.checkpoint_dir.display(),
            source.savepoint_dir.display()
        ),
        SourceKind::SavepointDirectory => {
            format!("savepoints in {}", source.savepoint_dir.display())
        }
    }
}

fn render_catalog(catalog: &Catalog) -> String {
    let mut out = format!("{}\n", describe_dirs(&catalog.source));
    if catalog.entries.is_empty() {
        out.push_str("no checkpoints or savepoints yet\n");
        return out;
    }
    out.push('\n');
    let mut rows = vec![
        [
            "ID",
            "KIND",
            "STATUS",
            "TRIGGERED (UTC)",
            "DURATION",
            "SIZE",
            "OPERATORS",
        ]
        .map(String::from)
        .to_vec(),
    ];
    for entry in &catalog.entries {
        rows.push(vec![
            entry.id.to_string(),
            entry.kind.to_string(),
            entry.status.to_string(),
            entry.trigger_time_ms.map_or("-".into(), human::format_utc),
            entry.duration_ms.map_or("-".into(), human::duration_ms),
            entry.state_bytes.map_or("-".into(), human::bytes),
            format_operators(&entry.operators),
        ]);
    }
    out.push_str(&render_table(&rows));
    let notes: Vec<&CatalogEntry> = catalog
        .entries
        .iter()
        .filter(|e| e.reason.is_some() || !e.temp_files.is_empty() || !e.needed_by.is_empty())
        .collect();
    if !notes.is_empty() {
        out.push('\n');
    }
    for entry in notes {
        if let Some(reason) = &entry.reason {
            out.push_str(&format!("{} {}: {reason}\n", entry.kind, entry.id));
        }
        if !entry.needed_by.is_empty() {
            let ids: Vec<String> = entry.needed_by.iter().map(ToString::to_string).collect();
            out.push_str(&format!(
                "{} {}: image deltas of checkpoint {} build on it: kept as long as they are\n",
                entry.kind,
                entry.id,
                ids.join(", ")
            ));
        }
        if entry.status != EntryStatus::Incomplete && !entry.temp_files.is_empty() {
            out.push_str(&format!(
                "{} {}: leftover temporary files {} (removed at the job's next start)\n",
                entry.kind,
                entry.id,
                entry.temp_files.join(", ")
            ));
        }
    }
    out.push('\n');
    match &catalog.latest_restorable {
        Some(latest) => {
            out.push_str(&format!(
                "latest restorable: {} {} (every file verified)\n  {}\n",
                latest.kind,
                latest.id,
                latest.path.display()
            ));
            let job = match &catalog.source.job_file {
                Some(file) => file.display().to_string(),
                None => "JOB.toml".to_string(),
            };
            out.push_str(&format!(
                "restore with: weir run {job} --restore {}\n",
                latest.path.display()
            ));
        }
        None => out.push_str(
            "nothing restorable: no complete checkpoint or savepoint verifies; the job would \
             start fresh\n",
        ),
    }
    out
}

fn format_operators(operators: &[OperatorSize]) -> String {
    if operators.is_empty() {
        return "-".into();
    }
    operators
        .iter()
        .map(|op| format!("{} {}", op.vertex, human::bytes(op.state_bytes)))
        .collect::<Vec<_>>()
        .join(", ")
}

// ---------------------------------------------------------------------------------------------
// weir checkpoints inspect PATH

fn inspect(path: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let inspection =
        catalog::inspect(path).with_context(|| format!("cannot inspect {}", path.display()))?;
    print_report(&inspection, json, render_inspection, inspection.ok())
}

fn render_inspection(inspection: &Inspection) -> String {
    let mut out = String::new();
    let verdict = match inspection.status {
        EntryStatus::Complete if inspection.ok() => "complete, every file verified",
        EntryStatus::Complete | EntryStatus::Corrupt => "CORRUPT: it cannot be restored",
        EntryStatus::Incomplete => "INCOMPLETE: it cannot be restored",
        EntryStatus::Removed => "REMOVED while being read (pruned by the running job)",
    };
    out.push_str(&format!("{}: {verdict}\n", inspection.path.display()));
    if let Some(meta) = &inspection.metadata {
        let field = |name: &str, value: String| format!("{:<13}{value}\n", format!("{name}:"));
        out.push('\n');
        out.push_str(&field("kind", meta.kind.to_string()));
        out.push_str(&field("id", meta.checkpoint_id.to_string()));
        out.push_str(&field("job", meta.job_name.clone()));
        out.push_str(&field("fingerprint", meta.job_fingerprint.clone()));
        out.push_str(&field("triggered", human::format_utc(meta.trigger_time_ms)));
        out.push_str(&field(
            "completed",
            human::format_utc(meta.completion_time_ms),
        ));
        out.push_str(&field("duration", human::duration_ms(meta.duration_ms)));
        let size = format!(
            "{} of state ({} on disk)",
            human::bytes(inspection.state_bytes.unwrap_or(0)),
            human::bytes(inspection.disk_bytes)
        );
        out.push_str(&field("size", size));
        let parallelism = meta
            .parallelism
            .iter()
            .map(|(vertex, p)| format!("{vertex} {p}"))
            .collect::<Vec<_>>()
            .join(", ");
        out.push_str(&field("parallelism", parallelism));
        out.push_str(&field("operators", format_operators(&inspection.operators)));
        out.push('\n');
        let mut rows = vec![
            [
                "TASK", "FILE", "STATE", "CRC32", "SYNC", "ASYNC", "ALIGN", "VERIFIED",
            ]
            .map(String::from)
            .to_vec(),
        ];
        for task in &inspection.tasks {
            rows.push(vec![
                format!("{}#{}", task.vertex, task.subtask),
                task.file.clone(),
                human::bytes(task.state_bytes),
                task.crc32.clone(),
                format!("{} ms", task.sync_duration_ms),
                format!("{} ms", task.async_duration_ms),
                format!("{} ms", task.alignment_duration_ms),
                if task.ok { "ok" } else { "PROBLEM" }.to_string(),
            ]);
        }
        out.push_str(&render_table(&rows));
    } else if !inspection.files.is_empty() {
        out.push_str("\nfiles:\n");
        for file in &inspection.files {
            out.push_str(&format!(
                "  {:<40} {}\n",
                file.name,
                human::bytes(file.bytes)
            ));
        }
    }
    render_findings(&mut out, &inspection.problems, &inspection.warnings);
    out
}

fn render_findings(out: &mut String, problems: &[FileProblem], warnings: &[FileProblem]) {
    if !problems.is_empty() {
        out.push_str("\nproblems:\n");
        for problem in problems {
            out.push_str(&format!("  {}\n", problem.message));
        }
    }
    if !warnings.is_empty() {
        out.push_str("\nwarnings:\n");
        for warning in warnings {
            out.push_str(&format!("  {}\n", warning.message));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// weir checkpoints verify DIR

fn verify(dir: &Path, json: bool) -> anyhow::Result<ExitCode> {
    let report = catalog::verify(dir)
        .with_context(|| format!("cannot verify the checkpoints of {}", dir.display()))?;
    print_report(&report, json, render_verify, report.ok())
}

fn render_verify(report: &VerifyReport) -> String {
    let mut out = format!("{}\n", describe_dirs(&report.source));
    if report.checkpoints.is_empty() {
        out.push_str("no checkpoints or savepoints: nothing to verify\n");
        return out;
    }
    out.push('\n');
    let names: Vec<String> = report
        .checkpoints
        .iter()
        .map(|c| format!("{} {}", c.kind, c.id))
        .collect();
    let width = names.iter().map(String::len).max().unwrap_or(0);
    for (checkpoint, name) in report.checkpoints.iter().zip(&names) {
        let verdict = match checkpoint.verdict {
            Verdict::Ok => format!(
                "ok: {} files, {}",
                checkpoint.files_checked,
                human::bytes(checkpoint.bytes_checked)
            ),
            Verdict::Failed => "FAILED: it cannot be restored".to_string(),
            Verdict::Incomplete => "incomplete: never restored, not a failure".to_string(),
            Verdict::Removed => "removed while being verified: not a failure".to_string(),
        };
        out.push_str(&format!("{name:<width$}  {verdict}\n"));
        for problem in &checkpoint.problems {
            out.push_str(&format!("  problem: {}\n", problem.message));
        }
        for warning in &checkpoint.warnings {
            out.push_str(&format!("  warning: {}\n", warning.message));
        }
    }
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let of = |verdict| {
        report
            .checkpoints
            .iter()
            .filter(|c| c.verdict == verdict)
            .count()
    };
    let mut summary = format!("{} verified", of(Verdict::Ok));
    for (verdict, what) in [
        (Verdict::Failed, "failed"),
        (Verdict::Incomplete, "incomplete"),
        (Verdict::Removed, "removed while verifying"),
    ] {
        if of(verdict) > 0 {
            summary.push_str(&format!(", {} {what}", of(verdict)));
        }
    }
    summary.push_str(&format!(
        "; {} read ({} sound); {}, {}",
        count(report.files_checked, "file"),
        human::bytes(report.bytes_checked),
        count(report.problems, "problem"),
        count(report.warnings, "warning")
    ));
    out.push('\n');
    if report.ok() {
        out.push_str(&format!("ok: {summary}\n"));
    } else {
        out.push_str(&format!(
            "FAILED: {summary}\nrestore skips a checkpoint with a problem (--restore latest falls \
             back to an older one); keep it for inspection or delete it\n"
        ));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Rendering helpers

/// A table of text columns, a line each.
fn render_table(rows: &[Vec<String>]) -> String {
    let mut out = human::table(rows, usize::MAX).join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_columns_and_leave_the_last_unpadded() {
        let rows = vec![
            vec!["ID".to_string(), "KIND".to_string(), "X".to_string()],
            vec![
                "12".to_string(),
                "savepoint".to_string(),
                "a, b".to_string(),
            ],
            vec!["7".to_string()],
        ];
        assert_eq!(
            render_table(&rows),
            "ID  KIND       X\n12  savepoint  a, b\n7\n"
        );
    }
}
