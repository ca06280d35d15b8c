//! `weir new LANG NAME`: a new operator project (the library's `tools::scaffold` makes it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use weir::tools::scaffold::{Language, scaffold};

use crate::EXIT_BAD_INPUT;

#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// The language: rust, c, assemblyscript or wat (`--list` shows them).
    #[arg(required_unless_present = "list")]
    language: Option<String>,
    /// The operator's name, also the project's directory unless --dir is given.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Where to make the project [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// List the languages and the toolchain each needs.
    #[arg(long)]
    list: bool,
}

/// The SDK of the checkout this `weir` was built from, if it is still there.
fn checkout_sdk() -> Option<PathBuf> {
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    sdk.join("Cargo.toml")
        .is_file()
        .then(|| sdk.canonicalize().ok())
        .flatten()
}

pub(crate) fn run(args: NewArgs) -> ExitCode {
    if args.list {
        for language in Language::ALL {
            println!("{:<15} {}", language.name(), language.toolchain());
        }
        return ExitCode::SUCCESS;
    }
    let (Some(language), Some(name)) = (args.language, args.name) else {
        eprintln!("error: give a language and a name: weir new LANG NAME (weir new --list)");
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    let Some(language) = Language::parse(&language) else {
        let names: Vec<&str> = Language::ALL.iter().map(|l| l.name()).collect();
        eprintln!(
            "error: no language `{language}`: choose one of {} (weir new --list)",
            names.join(", ")
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&name));
    match scaffold(language, &name, &dir, checkout_sdk().as_deref()) {
        Ok(project) => {
            println!("made {} ({language}):", dir.display());
            for file in &project.files {
                println!("  {}", file.display());
            }
            println!("next: see {}/README.md", dir.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
