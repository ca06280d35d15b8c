//! `docs/ABI.md` §3 and §4 list exactly the exports and imports of [`weir_abi::EXPORTS`] and
//! [`weir_abi::IMPORTS`], with their signatures and whether they are required, in the same
//! order: the table the host checks modules against and the text guest authors read cannot
//! drift apart.

use std::path::Path;

use weir_abi::{EXPORTS, ExportKind, IMPORT_MODULE, IMPORTS};

/// The text of `docs/ABI.md` between the heading starting `## {start}` and the next `## `.
fn section(start: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/ABI.md");
    let abi = std::fs::read_to_string(&path).expect("docs/ABI.md");
    let rest = abi
        .split(&format!("\n## {start}"))
        .nth(1)
        .unwrap_or_else(|| panic!("docs/ABI.md has no section `## {start}`"));
    rest.split("\n## ").next().unwrap_or(rest).to_string()
}

/// The body rows of the tables in `text` whose header row is `header`, as their cells.
fn rows(text: &str, header: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let line = line.trim();
        if line == header {
            inside = true;
            continue;
        }
        if !line.starts_with('|') {
            inside = false;
            continue;
        }
        if inside && !line.starts_with("|---") {
            let cells = line.trim_matches('|').split(" | ");
            rows.push(cells.map(|c| c.trim().to_string()).collect());
        }
    }
    rows
}

/// A documented signature without backticks and parameter names: `(ptr: i32, len: i32) -> i32`
/// becomes `(i32, i32) -> i32`, as [`weir_abi::Signature`] displays.
fn plain_signature(cell: &str) -> String {
    let cell = cell.trim_matches('`');
    let Some((params, results)) = cell.strip_prefix('(').and_then(|rest| rest.split_once(')'))
    else {
        return cell.to_string();
    };
    let params: Vec<&str> = params
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| p.rsplit(": ").next().unwrap_or(p))
        .collect();
    format!("({}){results}", params.join(", "))
}

#[test]
fn abi_md_lists_exactly_the_exports_of_the_table() {
    let documented: Vec<(String, String, String)> = rows(
        &section("3. Exports"),
        "| export | signature | required | meaning |",
    )
    .into_iter()
    .map(|cells| {
        (
            cells[0].trim_matches('`').to_string(),
            plain_signature(&cells[1]),
            cells[2].clone(),
        )
    })
    .collect();
    let table: Vec<(String, String, String)> = EXPORTS
        .iter()
        .map(|export| {
            let ty = match export.kind {
                ExportKind::Memory => "memory".to_string(),
                ExportKind::Func(signature) => signature.to_string(),
            };
            let required = if export.required { "yes" } else { "no" };
            (export.name.to_string(), ty, required.to_string())
        })
        .collect();
    assert_eq!(
        documented, table,
        "docs/ABI.md §3 (left) and weir_abi::EXPORTS (right) differ"
    );
}

#[test]
fn abi_md_says_what_happens_without_each_optional_export() {
    let documented: Vec<String> = rows(&section("3. Exports"), "| absent | the host |")
        .into_iter()
        .map(|cells| cells[0].trim_matches('`').to_string())
        .collect();
    let optional: Vec<String> = EXPORTS
        .iter()
        .filter(|export| !export.required)
        .map(|export| export.name.to_string())
        .collect();
    assert_eq!(documented, optional);
}

#[test]
fn abi_md_lists_exactly_the_imports_of_the_table() {
    // A bare name is in the module `weir`; `env.abort` names its module.
    let documented: Vec<(String, String, String)> =
        rows(&section("4. Imports"), "| import | signature | meaning |")
            .into_iter()
            .map(|cells| {
                let name = cells[0].trim_matches('`');
                let (module, name) = name.split_once('.').unwrap_or((IMPORT_MODULE, name));
                (
                    module.to_string(),
                    name.to_string(),
                    plain_signature(&cells[1]),
                )
            })
            .collect();
    let table: Vec<(String, String, String)> = IMPORTS
        .iter()
        .map(|import| {
            (
                import.module.to_string(),
                import.name.to_string(),
                import.signature.to_string(),
            )
        })
        .collect();
    assert_eq!(
        documented, table,
        "docs/ABI.md §4 (left) and weir_abi::IMPORTS (right) differ"
    );
}

#[test]
fn documented_signatures_lose_only_their_parameter_names() {
    assert_eq!(
        plain_signature("`(ptr: i32, len: i32) -> i32`"),
        "(i32, i32) -> i32"
    );
    assert_eq!(plain_signature("`()`"), "()");
    assert_eq!(plain_signature("`() -> i32`"), "() -> i32");
    assert_eq!(plain_signature("memory"), "memory");
}
