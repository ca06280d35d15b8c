//! Rows for the reliability table (`docs/RELIABILITY.md`): every fault scenario of this suite
//! records what it ran, what it injected and how it ended, so that the table is produced by
//! running the tests (`scripts/reliability.sh`), never written by hand.
//!
//! A row is written only when `WEIR_RELIABILITY_LOG` names a file: one JSON object per line,
//! appended (tests run in parallel, and one line is one `write` call on a file opened in append
//! mode, so rows never interleave). Without the variable, [`record`] does nothing.

use std::fs::OpenOptions;
use std::io::Write as _;

/// The environment variable naming the file rows are appended to.
pub(crate) const LOG_VAR: &str = "WEIR_RELIABILITY_LOG";

/// One row of the reliability table.
#[derive(Debug, Clone)]
pub(crate) struct Row<'a> {
    /// The area of the issue it proves: `chaos`, `isolation`, `storage`, `back-pressure`, `fuzz`.
    pub(crate) area: &'a str,
    /// What was run, in a few words ("SIGKILL at named point `metadata-write`").
    pub(crate) scenario: &'a str,
    /// How many times it ran (rounds, kills, cases).
    pub(crate) rounds: u64,
    /// The faults injected, in a few words.
    pub(crate) faults: &'a str,
    /// What was observed and checked ("committed output identical to the undisturbed run").
    pub(crate) result: &'a str,
}

/// Appends `row` to the file `WEIR_RELIABILITY_LOG` names, if it names one. Called only after
/// the scenario's assertions passed: a failed scenario fails its test, and the table is written
/// only when every test passed.
pub(crate) fn record(row: &Row<'_>) {
    let Some(path) = std::env::var_os(LOG_VAR) else {
        return;
    };
    let line = serde_json::json!({
        "area": row.area,
        "scenario": row.scenario,
        "rounds": row.rounds,
        "faults": row.faults,
        "result": row.result,
    });
    let mut text = line.to_string();
    text.push('\n');
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("cannot open {LOG_VAR}={}: {e}", path.to_string_lossy()));
    file.write_all(text.as_bytes())
        .unwrap_or_else(|e| panic!("cannot append to {}: {e}", path.to_string_lossy()));
}
