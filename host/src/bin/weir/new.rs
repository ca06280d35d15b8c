//! `weir new LANG NAME`: a new operator project (the library's `tools::scaffold` makes it).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use weir::tools::scaffold::{Language, SDK_ENV, SdkSource, choose_sdk, scaffold};

use crate::EXIT_BAD_INPUT;

#[derive(clap::Args)]
pub(crate) struct NewArgs {
    /// The language (`--list` shows them with their toolchains).
    #[arg(required_unless_present = "list", help = language_help())]
    language: Option<String>,
    /// The operator's name, also the project's directory unless --dir is given.
    #[arg(required_unless_present = "list")]
    name: Option<String>,
    /// Where to make the project [default: ./NAME].
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// The Weir checkout whose SDK the project builds against (or its guest-sdk/) [default:
    /// $WEIR_SDK, else the checkout this weir was built in, if it still exists].
    #[arg(long, value_name = "CHECKOUT")]
    sdk: Option<PathBuf>,
    /// List the languages and the toolchain each needs.
    #[arg(long)]
    list: bool,
}

/// The language argument's help, from the one list of languages `--list` prints.
fn language_help() -> String {
    format!(
        "The language: {} (`--list` shows the toolchain each needs)",
        Language::names()
    )
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
        eprintln!(
            "error: no language `{language}`: choose {} (weir new --list)",
            Language::names()
        );
        return ExitCode::from(EXIT_BAD_INPUT);
    };
    let dir = args.dir.unwrap_or_else(|| PathBuf::from(&name));
    // The checkout this weir was built in: only a default, used when it still exists.
    let built_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest-sdk");
    let env = std::env::var_os(SDK_ENV);
    let made = choose_sdk(args.sdk.as_deref(), env.as_deref(), &built_in).and_then(|sdk| {
        scaffold(
            language,
            &name,
            &dir,
            sdk.as_ref().map(|sdk| sdk.dir.as_path()),
        )
        .map(|project| (project, sdk))
    });
    match made {
        Ok((project, sdk)) => {
            println!("made {} ({language}):", dir.display());
            for file in &project.files {
                println!("  {}", file.display());
            }
            match sdk.filter(|_| language.uses_sdk()) {
                Some(sdk) if sdk.source == SdkSource::BuiltIn => println!(
                    "SDK: {} ({}; --sdk or {SDK_ENV} chooses another)",
                    sdk.dir.display(),
                    sdk.source
                ),
                Some(sdk) => println!("SDK: {} (from {})", sdk.dir.display(), sdk.source),
                None => {}
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
