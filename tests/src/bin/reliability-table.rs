//! Renders `docs/RELIABILITY.md` from the rows the fault tests and the fuzz script recorded
//! (`WEIR_RELIABILITY_LOG`, one JSON object per line; see `tests/all/report.rs`).
//! `scripts/reliability.sh` runs the scenarios and then this; nobody edits the table by hand.
//!
//! Usage: `reliability-table ROWS.jsonl OUTPUT.md` with `WEIR_RELIABILITY_COMMAND`,
//! `WEIR_RELIABILITY_COMMIT` and `WEIR_RELIABILITY_SETTINGS` describing the run.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

/// The areas of the issue, in the order the document presents them, with their headings.
const AREAS: [(&str, &str); 5] = [
    (
        "chaos",
        "Crash recovery (SIGKILL, restart with `--restore latest`)",
    ),
    ("isolation", "Guest isolation"),
    ("storage", "Storage faults"),
    ("back-pressure", "Back-pressure"),
    ("fuzz", "Fuzzing"),
];

/// How each area is tested and how to repeat one scenario alone.
const HOW: &str = "\
## How the scenarios work

- **Crash recovery** (`tests/all/chaos.rs`, `tests/all/kill_points.rs`): a real `weir` process is
  killed with SIGKILL and restarted with `weir run JOB --restore latest` until the job ends; the
  committed output of the exactly-once file sink must equal that of an undisturbed run, line for
  line, with nothing lost or duplicated. Random-moment kills land a random delay after the start
  or after a checkpoint; named kill points come from the host's test hook
  `WEIR_TEST_KILL_AT=POINT:N` (`host/src/kill_point.rs`), which kills the process the `N`-th time
  it reaches `POINT`: `process-batch`, `alignment`, `after-snapshot`, `state-write`,
  `metadata-write`, `before-commit`, `sink-commit`, `restore`. The jobs: word count (file source
  → split → key-hash → count p=2 → file sink p=2) and a two-input job (two generators of
  parallelism 2 → two key-hash inputs of count p=3 → file sink p=3). Repeat one with
  `WEIR_CHAOS_SEED=<seed> WEIR_CHAOS_ROUNDS=<n> cargo test -p weir-tests --test all chaos::`
  (or `WEIR_KILL_POINT_ROUNDS=<n> … kill_points::`); every failure prints its seed.
- **Guest isolation** (`tests/all/isolation.rs`): hostile guests in real jobs; each must end in a
  failure that names the operator, subtask and cause, with the restart strategy applied, bounded
  host memory and no hang.
- **Storage faults** (`tests/all/storage_faults.rs`): real ENOSPC and read-only file systems on
  a small tmpfs where the machine allows mounting (injected errors otherwise, said loudly), and
  damaged files of completed checkpoints.
- **Back-pressure** (`tests/all/backpressure.rs`): a full-speed generator behind a slow wasm
  stage; resident memory is sampled from `/proc` every 100 ms.
- **Fuzzing** (`fuzz/`, `scripts/fuzz.sh`): cargo-fuzz targets; the committed corpora and every
  fixed crash are replayed on stable Rust in every CI run.

";

/// One recorded row.
#[derive(Debug, serde::Deserialize)]
struct Row {
    area: String,
    scenario: String,
    rounds: u64,
    faults: String,
    result: String,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [rows_path, out_path] = args.as_slice() else {
        eprintln!("usage: reliability-table ROWS.jsonl OUTPUT.md");
        return ExitCode::from(2);
    };
    let text = match std::fs::read_to_string(rows_path) {
        Ok(text) => text,
        Err(e) => {
            eprintln!("error: cannot read {rows_path}: {e}");
            return ExitCode::from(2);
        }
    };
    let mut by_area: BTreeMap<&str, Vec<Row>> = BTreeMap::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let row: Row = match serde_json::from_str(line) {
            Ok(row) => row,
            Err(e) => {
                eprintln!("error: {rows_path}:{}: not a reliability row: {e}", n + 1);
                return ExitCode::from(2);
            }
        };
        let Some((area, _)) = AREAS.iter().find(|(a, _)| *a == row.area) else {
            eprintln!(
                "error: {rows_path}:{}: unknown area {:?}; expected one of {:?}",
                n + 1,
                row.area,
                AREAS.map(|(a, _)| a)
            );
            return ExitCode::from(2);
        };
        by_area.entry(area).or_default().push(row);
    }
    for rows in by_area.values_mut() {
        rows.sort_by(|a, b| a.scenario.cmp(&b.scenario));
    }
    let document = render(&by_area);
    if let Err(e) = std::fs::write(out_path, document) {
        eprintln!("error: cannot write {out_path}: {e}");
        return ExitCode::from(2);
    }
    let rows: usize = by_area.values().map(Vec::len).sum();
    eprintln!("wrote {out_path}: {rows} rows");
    ExitCode::SUCCESS
}

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| "(not recorded)".into())
}

/// Escapes what would break a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

fn render(by_area: &BTreeMap<&str, Vec<Row>>) -> String {
    let mut out = String::new();
    out.push_str(
        "# Reliability\n\n\
         What Weir has been shown to survive, scenario by scenario. **This file is generated** by\n\
         `scripts/reliability.sh` from the rows the fault tests record when they pass (see\n\
         `tests/all/report.rs`) and from `scripts/fuzz.sh`; edit those, not this file. The same\n\
         scenarios run in every CI run (`.ci/run`) with fewer rounds; the numbers below are from\n\
         the long run described here.\n\n",
    );
    writeln!(out, "- Command: `{}`", env("WEIR_RELIABILITY_COMMAND")).unwrap();
    writeln!(out, "- Commit: `{}`", env("WEIR_RELIABILITY_COMMIT")).unwrap();
    writeln!(out, "- Settings: {}", env("WEIR_RELIABILITY_SETTINGS")).unwrap();
    writeln!(out, "- Machine: {}", env("WEIR_RELIABILITY_MACHINE")).unwrap();
    out.push('\n');
    out.push_str(HOW);
    for (area, heading) in AREAS {
        writeln!(out, "## {heading}\n").unwrap();
        let Some(rows) = by_area.get(area) else {
            out.push_str("No rows were recorded for this area in this run.\n\n");
            continue;
        };
        let total: u64 = rows.iter().map(|r| r.rounds).sum();
        out.push_str("| scenario | rounds | faults injected | result |\n|---|---:|---|---|\n");
        for row in rows {
            writeln!(
                out,
                "| {} | {} | {} | {} |",
                cell(&row.scenario),
                row.rounds,
                cell(&row.faults),
                cell(&row.result)
            )
            .unwrap();
        }
        writeln!(out, "\n{} scenarios, {total} rounds in all.\n", rows.len()).unwrap();
    }
    out
}
