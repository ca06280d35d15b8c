//! Renders `docs/RELIABILITY.md` from the rows the fault tests and the fuzz script recorded
//! (`WEIR_RELIABILITY_LOG`, one JSON object per line; see `tests/all/support/report.rs`).
//! `scripts/reliability.sh` runs the scenarios and then this; nobody edits the table by hand.
//!
//! Usage: `reliability-table ROWS.jsonl OUTPUT.md [--only AREA,…]` with `WEIR_RELIABILITY_COMMAND`,
//! `WEIR_RELIABILITY_COMMIT` and `WEIR_RELIABILITY_SETTINGS` describing the run.
//!
//! With `--only`, the run covered just those areas: their sections of the existing OUTPUT.md are
//! replaced (or added, in their place), each with a line saying which run produced it, and every
//! other section is kept as the run that wrote it left it.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::process::ExitCode;

/// The areas of the issue, in the order the document presents them, with their headings.
const AREAS: [(&str, &str); 8] = [
    (
        "chaos",
        "Crash recovery (SIGKILL, restart with `--restore latest`)",
    ),
    ("kafka", "Exactly-once through Kafka (SIGKILL)"),
    (
        "kafka-cluster",
        "Exactly-once on a real Kafka cluster (brokers killed and paused)",
    ),
    ("isolation", "Guest isolation"),
    ("storage", "Storage faults"),
    ("back-pressure", "Back-pressure"),
    ("misuse", "Operator mistakes and other local users"),
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
  `WEIR_TEST_KILL_AT=POINT:N` (`host/src/kill_point.rs`, built only with the cargo feature
  `test-hooks` that the test crates enable), which kills the process the `N`-th time it reaches
  `POINT`: `process-batch`, `alignment`, `after-snapshot`, `state-write`,
  `metadata-write`, `before-commit`, `sink-commit`, `restore`. The jobs: word count (file source
  → split → key-hash → count p=2 → file sink p=2) and a two-input job (two generators of
  parallelism 2 → two key-hash inputs of count p=3 → file sink p=3), and an event-time job
  (`tests/all/event_time.rs`: a Kafka topic with one idle partition → tumbling windows with
  lateness and a late output, killed after a window fired) whose results and late output must
  be those docs/WINDOWS.md gives. Repeat one with
  `WEIR_CHAOS_SEED=<seed> WEIR_CHAOS_ROUNDS=<n> cargo test -p weir-tests --test all chaos::`
  (or `WEIR_KILL_POINT_ROUNDS=<n> … kill_points::`); every failure prints its seed.
- **Exactly-once through Kafka** (`tests/all/kafka/exactly_once.rs`, against a real
  Kafka-protocol broker): kafka (4 partitions, p=2) → key-hash → count p=2 → exactly-once Kafka
  sink p=2, and the same with a file on either side; each round appends input and is killed at a
  named point (`sink-commit` and `sink-committed` too) or at a random moment; what a
  read_committed consumer sees must equal an undisturbed run, in order per key within each
  partition (`WEIR_KAFKA_ROUNDS=<n> WEIR_CHAOS_SEED=<seed> … kafka::exactly_once::`).
- **Exactly-once on a real Kafka cluster** (`tests/all/kafka/cluster.rs`): the same Kafka →
  count → Kafka job on three Apache Kafka nodes (replication factor 3, `min.insync.replicas`
  2), restarting itself after failures; in every round a broker is SIGKILLed and started again
  (the leader of an output partition, or the transaction coordinator) or the coordinator is
  paused (SIGSTOP) past the sink's transaction timeout, while `weir` is SIGKILLed at a random
  moment or after a checkpoint; a final run restores and finishes, and the read_committed output
  must equal an undisturbed run's (`WEIR_CLUSTER_ROUNDS=<n> WEIR_CHAOS_SEED=<seed> …
  kafka::cluster::`).
- **Guest isolation** (`tests/all/isolation.rs`): hostile guests in real jobs; each must end in a
  failure that names the operator, subtask and cause, with the restart strategy applied, bounded
  host memory and no hang.
- **Storage faults** (`tests/all/storage_faults.rs`): real ENOSPC and read-only file systems on
  a small tmpfs where the machine allows mounting (injected errors otherwise, said loudly), and
  damaged files of completed checkpoints.
- **Back-pressure** (`tests/all/backpressure.rs`): a full-speed generator behind a slow wasm
  stage; resident memory is sampled from `/proc` every 100 ms.
- **Operator mistakes and other local users** (`tests/all/misuse.rs`,
  `tests/all/bad_job_files.rs`, `tests/all/control.rs`): a second run of a running job, two
  jobs on one sink directory, file sinks with equal or nested paths, `--restore latest` with
  nothing to restore after an earlier run committed output, a crash between a checkpoint's
  trigger and its completion, and requests to the control endpoint without the token, from
  another user, with a foreign `Host` or `Origin`, as a simple cross-site POST, or as a flood of
  savepoints. Each must be refused with a message naming the problem and the way on, and
  committed output must stay exact.
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
    let (rows_path, out_path, only) = match args.as_slice() {
        [rows, out] => (rows, out, None),
        [rows, out, flag, areas] if flag == "--only" => {
            let areas: Vec<String> = areas.split(',').map(str::to_string).collect();
            if let Some(unknown) = areas.iter().find(|a| !AREAS.iter().any(|(k, _)| k == a)) {
                eprintln!(
                    "error: --only {unknown:?}: unknown area; expected some of {:?}",
                    AREAS.map(|(a, _)| a)
                );
                return ExitCode::from(2);
            }
            (rows, out, Some(areas))
        }
        _ => {
            eprintln!("usage: reliability-table ROWS.jsonl OUTPUT.md [--only AREA,...]");
            return ExitCode::from(2);
        }
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
    let document = match &only {
        None => render(&by_area),
        Some(areas) => {
            let existing = match std::fs::read_to_string(out_path) {
                Ok(text) => text,
                Err(e) => {
                    eprintln!("error: --only updates {out_path}, which cannot be read: {e}");
                    return ExitCode::from(2);
                }
            };
            update(&existing, &by_area, areas)
        }
    };
    if let Err(e) = std::fs::write(out_path, document) {
        eprintln!("error: cannot write {out_path}: {e}");
        return ExitCode::from(2);
    }
    let rows: usize = by_area.values().map(Vec::len).sum();
    eprintln!("wrote {out_path}: {rows} rows");
    ExitCode::SUCCESS
}

/// The sections of `existing` (split at `## ` headings): the text before the first, then each
/// heading with its body.
fn sections(existing: &str) -> (String, Vec<(String, String)>) {
    let mut preamble = String::new();
    let mut sections: Vec<(String, String)> = Vec::new();
    for line in existing.split_inclusive('\n') {
        if let Some(heading) = line.strip_prefix("## ") {
            sections.push((heading.trim_end().to_string(), String::new()));
        } else if let Some((_, body)) = sections.last_mut() {
            body.push_str(line);
        } else {
            preamble.push_str(line);
        }
    }
    (preamble, sections)
}

/// `existing` with the "how" section and the sections of `areas` rendered anew from this
/// run's rows, each of those saying which run produced it; other sections are kept.
fn update(existing: &str, by_area: &BTreeMap<&str, Vec<Row>>, areas: &[String]) -> String {
    let (preamble, kept) = sections(existing);
    let (_, how) = sections(HOW);
    // The document's order: the "how" section, every area's, then anything else kept.
    let mut order: Vec<String> = how.iter().map(|(h, _)| h.clone()).collect();
    order.extend(AREAS.iter().map(|(_, heading)| heading.to_string()));
    for (heading, _) in &kept {
        if !order.contains(heading) {
            order.push(heading.clone());
        }
    }
    let mut out = preamble;
    for heading in &order {
        let rerun = AREAS
            .iter()
            .find(|(_, h)| h == heading)
            .map(|(a, _)| *a)
            .filter(|a| areas.iter().any(|x| x == a));
        if let Some((_, body)) = how.iter().find(|(h, _)| h == heading) {
            write!(out, "## {heading}\n{body}").unwrap();
        } else if let Some(area) = rerun {
            writeln!(out, "## {heading}\n").unwrap();
            writeln!(
                out,
                "This section is from a run of these scenarios alone: `{}`, commit `{}`; {}; {}.\n",
                env("WEIR_RELIABILITY_COMMAND"),
                env("WEIR_RELIABILITY_COMMIT"),
                env("WEIR_RELIABILITY_SETTINGS"),
                env("WEIR_RELIABILITY_MACHINE"),
            )
            .unwrap();
            area_table(&mut out, by_area.get(area));
        } else if let Some((_, body)) = kept.iter().find(|(h, _)| h == heading) {
            write!(out, "## {heading}\n{body}").unwrap();
        }
    }
    out
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
         `tests/all/support/report.rs`) and from `scripts/fuzz.sh`; edit those, not this file.\n\
         The same scenarios run in every CI run (`.ci/run`) with fewer rounds; the numbers below\n\
         are from the long run described here.\n\n",
    );
    writeln!(out, "- Command: `{}`", env("WEIR_RELIABILITY_COMMAND")).unwrap();
    writeln!(out, "- Commit: `{}`", env("WEIR_RELIABILITY_COMMIT")).unwrap();
    writeln!(out, "- Settings: {}", env("WEIR_RELIABILITY_SETTINGS")).unwrap();
    writeln!(out, "- Machine: {}", env("WEIR_RELIABILITY_MACHINE")).unwrap();
    out.push('\n');
    out.push_str(HOW);
    for (area, heading) in AREAS {
        writeln!(out, "## {heading}\n").unwrap();
        area_table(&mut out, by_area.get(area));
    }
    out
}

/// An area's table and its totals, or a line saying the run recorded none.
fn area_table(out: &mut String, rows: Option<&Vec<Row>>) {
    let Some(rows) = rows else {
        out.push_str("No rows were recorded for this area in this run.\n\n");
        return;
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
