//! [`EXPORTS`] and [`IMPORTS`]: every export and import of the ABI as plain data — name, type,
//! whether it is required, what the host does without it.
//!
//! # Why a table
//!
//! The host checks modules against the ABI in two places: the loader, which refuses a module
//! at its first problem, and `weir validate`, which lists every problem and every fact. Each
//! used to carry its own copy of the signatures, and the copies drifted apart. Both now read
//! this table, and a test checks `docs/ABI.md` §3 and §4 against it, so the loader, the
//! validator and the documentation say the same thing.
//!
//! The table is data only: matching it against a compiled module's types is the host's job
//! (the crate depends on no wasm runtime).

use core::fmt;

use crate::{IMPORT_MODULE, env, exports, imports};

/// A value type of the ABI's function signatures: the ABI uses only these two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValType {
    /// A 32-bit integer: pointers, lengths, statuses, log levels.
    I32,
    /// A 64-bit integer: checkpoint ids, timestamps, watermarks.
    I64,
}

impl ValType {
    /// Its name in the WebAssembly text format: `i32` or `i64`.
    pub const fn name(self) -> &'static str {
        match self {
            ValType::I32 => "i32",
            ValType::I64 => "i64",
        }
    }
}

impl fmt::Display for ValType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A function signature of the ABI. Displays as `(i32, i32) -> i32`, `(i32, i32)` or `()`,
/// the spelling of `docs/ABI.md` without the parameter names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Signature {
    /// The parameter types, in order.
    pub params: &'static [ValType],
    /// The result types, in order (none or one in this ABI).
    pub results: &'static [ValType],
}

impl Signature {
    /// `()`: `_initialize`.
    pub const UNIT: Signature = Signature {
        params: &[],
        results: &[],
    };
    /// `() -> i32`: `weir_abi_version`, `weir_finish`.
    pub const STATUS: Signature = Signature {
        params: &[],
        results: &[ValType::I32],
    };
    /// `(len: i32) -> i32`: `weir_alloc`.
    pub const ALLOC: Signature = Signature {
        params: &[ValType::I32],
        results: &[ValType::I32],
    };
    /// `(ptr: i32, len: i32) -> i32`: exports taking a buffer, and the `state_get` import.
    pub const BUFFER: Signature = Signature {
        params: &[ValType::I32, ValType::I32],
        results: &[ValType::I32],
    };
    /// `(checkpoint_id: i64) -> i32`: exports taking a checkpoint id (or a watermark).
    pub const CHECKPOINT: Signature = Signature {
        params: &[ValType::I64],
        results: &[ValType::I32],
    };
    /// `(ptr: i32, len: i32)`: imports taking a guest buffer.
    pub const PTR_LEN: Signature = Signature {
        params: &[ValType::I32, ValType::I32],
        results: &[],
    };
    /// `(ptr: i32)`: the `state_result` import.
    pub const PTR: Signature = Signature {
        params: &[ValType::I32],
        results: &[],
    };
    /// `(level: i32, ptr: i32, len: i32)`: the `log` import.
    pub const LOG: Signature = Signature {
        params: &[ValType::I32, ValType::I32, ValType::I32],
        results: &[],
    };
    /// `(message: i32, file: i32, line: i32, column: i32)`: AssemblyScript's `env.abort`.
    pub const ABORT: Signature = Signature {
        params: &[ValType::I32, ValType::I32, ValType::I32, ValType::I32],
        results: &[],
    };
    /// `(name_ptr: i32, name_len: i32, ptr: i32, len: i32)`: `emit_to`.
    pub const EMIT_TO: Signature = Signature::ABORT;
    /// `(domain: i32, timestamp: i64, key_ptr: i32, key_len: i32)`: `timer_set` and
    /// `timer_delete`.
    pub const TIMER: Signature = Signature {
        params: &[ValType::I32, ValType::I64, ValType::I32, ValType::I32],
        results: &[],
    };
    /// `(domain: i32) -> i64`: `current_time`.
    pub const CURRENT_TIME: Signature = Signature {
        params: &[ValType::I32],
        results: &[ValType::I64],
    };
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("(")?;
        for (i, ty) in self.params.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(ty.name())?;
        }
        f.write_str(")")?;
        match self.results {
            [] => Ok(()),
            [one] => write!(f, " -> {one}"),
            many => {
                f.write_str(" -> (")?;
                for (i, ty) in many.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    f.write_str(ty.name())?;
                }
                f.write_str(")")
            }
        }
    }
}

/// What the ABI exports under a name: the memory, or a function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportKind {
    /// The linear memory: one, unshared, 32-bit (`docs/ABI.md` §1).
    Memory,
    /// A function with this signature.
    Func(Signature),
}

/// One export of the ABI (`docs/ABI.md` §3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Export {
    /// Its name, one of [`exports`].
    pub name: &'static str,
    /// What it must be.
    pub kind: ExportKind,
    /// Whether the host refuses a module without it.
    pub required: bool,
    /// For an optional export: what the host does when it is absent, in a few words (what
    /// `weir validate` prints). `None` for required exports.
    pub when_absent: Option<&'static str>,
}

/// Every export of the ABI, in the order of `docs/ABI.md` §3: `memory`, the required functions,
/// the optional ones, and last `_initialize`, which the C and AssemblyScript toolchains export.
pub const EXPORTS: [Export; 12] = [
    Export {
        name: exports::MEMORY,
        kind: ExportKind::Memory,
        required: true,
        when_absent: None,
    },
    Export {
        name: exports::ABI_VERSION,
        kind: ExportKind::Func(Signature::STATUS),
        required: true,
        when_absent: None,
    },
    Export {
        name: exports::ALLOC,
        kind: ExportKind::Func(Signature::ALLOC),
        required: true,
        when_absent: None,
    },
    Export {
        name: exports::PROCESS,
        kind: ExportKind::Func(Signature::BUFFER),
        required: true,
        when_absent: None,
    },
    Export {
        name: exports::INIT,
        kind: ExportKind::Func(Signature::BUFFER),
        required: false,
        when_absent: Some("the host skips it, and refuses a non-empty config"),
    },
    Export {
        name: exports::SNAPSHOT,
        kind: ExportKind::Func(Signature::CHECKPOINT),
        required: false,
        when_absent: Some("every snapshot is empty"),
    },
    Export {
        name: exports::RESTORE,
        kind: ExportKind::Func(Signature::BUFFER),
        required: false,
        when_absent: Some("only an empty state can be restored"),
    },
    Export {
        name: exports::CHECKPOINT_COMPLETE,
        kind: ExportKind::Func(Signature::CHECKPOINT),
        required: false,
        when_absent: Some("the host skips the notice"),
    },
    Export {
        name: exports::FINISH,
        kind: ExportKind::Func(Signature::STATUS),
        required: false,
        when_absent: Some("the host skips it"),
    },
    Export {
        name: exports::ON_TIMERS,
        kind: ExportKind::Func(Signature::BUFFER),
        required: false,
        when_absent: Some("the module may not set timers"),
    },
    Export {
        name: exports::ON_WATERMARK,
        kind: ExportKind::Func(Signature::CHECKPOINT),
        required: false,
        when_absent: Some("the host skips the notice"),
    },
    Export {
        name: exports::INITIALIZE,
        kind: ExportKind::Func(Signature::UNIT),
        required: false,
        when_absent: Some("nothing runs after instantiation"),
    },
];

/// One function the host provides to guests (`docs/ABI.md` §4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Import {
    /// The module it is imported from: [`IMPORT_MODULE`], or [`env::MODULE`] for `abort`.
    pub module: &'static str,
    /// Its name, one of [`imports`] or [`env::ABORT`].
    pub name: &'static str,
    /// Its signature.
    pub signature: Signature,
}

/// Every import the host provides, in the order of `docs/ABI.md` §4. A module importing
/// anything else is refused.
pub const IMPORTS: [Import; 12] = [
    Import {
        module: IMPORT_MODULE,
        name: imports::EMIT,
        signature: Signature::PTR_LEN,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::SAVE_STATE,
        signature: Signature::PTR_LEN,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::FAIL,
        signature: Signature::PTR_LEN,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::LOG,
        signature: Signature::LOG,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::EMIT_TO,
        signature: Signature::EMIT_TO,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::TIMER_SET,
        signature: Signature::TIMER,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::TIMER_DELETE,
        signature: Signature::TIMER,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::CURRENT_TIME,
        signature: Signature::CURRENT_TIME,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::STATE_GET,
        signature: Signature::BUFFER,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::STATE_RESULT,
        signature: Signature::PTR,
    },
    Import {
        module: IMPORT_MODULE,
        name: imports::STATE_WRITE,
        signature: Signature::PTR_LEN,
    },
    Import {
        module: env::MODULE,
        name: env::ABORT,
        signature: Signature::ABORT,
    },
];

/// The export of the ABI named `name`, if there is one.
pub fn export(name: &str) -> Option<&'static Export> {
    EXPORTS.iter().find(|export| export.name == name)
}

/// The import the host provides as `module`.`name`, if there is one.
pub fn import(module: &str, name: &str) -> Option<&'static Import> {
    IMPORTS
        .iter()
        .find(|import| import.module == module && import.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_display_as_the_docs_spell_them_without_names() {
        assert_eq!(Signature::UNIT.to_string(), "()");
        assert_eq!(Signature::STATUS.to_string(), "() -> i32");
        assert_eq!(Signature::CHECKPOINT.to_string(), "(i64) -> i32");
        assert_eq!(Signature::LOG.to_string(), "(i32, i32, i32)");
        let pair = Signature {
            params: &[],
            results: &[ValType::I32, ValType::I64],
        };
        assert_eq!(pair.to_string(), "() -> (i32, i64)");
    }

    #[test]
    fn names_are_unique_and_only_optional_exports_say_what_happens_when_absent() {
        for (i, a) in EXPORTS.iter().enumerate() {
            assert!(
                EXPORTS[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
            assert_eq!(a.required, a.when_absent.is_none(), "{}", a.name);
        }
        for (i, a) in IMPORTS.iter().enumerate() {
            assert!(
                IMPORTS[i + 1..]
                    .iter()
                    .all(|b| (b.module, b.name) != (a.module, a.name)),
                "{}.{}",
                a.module,
                a.name
            );
        }
        assert_eq!(
            export(exports::MEMORY).map(|e| e.kind),
            Some(ExportKind::Memory)
        );
        assert_eq!(
            import(env::MODULE, env::ABORT).map(|i| i.signature),
            Some(Signature::ABORT)
        );
        assert!(import(IMPORT_MODULE, env::ABORT).is_none());
    }
}
