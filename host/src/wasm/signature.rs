//! [`Signature`]: the function types of the ABI's exports and imports, and how to name a
//! module's types in error messages.

use std::fmt;

use wasmtime::{ExternType, FuncType, ValType};

/// A value type of the ABI's function signatures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ty {
    I32,
    I64,
}

impl Ty {
    fn matches(self, ty: &ValType) -> bool {
        match self {
            Ty::I32 => matches!(ty, ValType::I32),
            Ty::I64 => matches!(ty, ValType::I64),
        }
    }
}

/// A function signature of the ABI (`docs/ABI.md` §3, §4), displayed as
/// `a function (i32, i32) -> i32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signature {
    params: &'static [Ty],
    results: &'static [Ty],
}

impl Signature {
    /// `() -> ()`: `_initialize`.
    pub(crate) const UNIT: Signature = Signature {
        params: &[],
        results: &[],
    };
    /// `() -> i32`: `weir_abi_version`, `weir_finish`.
    pub(crate) const STATUS: Signature = Signature {
        params: &[],
        results: &[Ty::I32],
    };
    /// `(i32) -> i32`: `weir_alloc`.
    pub(crate) const ALLOC: Signature = Signature {
        params: &[Ty::I32],
        results: &[Ty::I32],
    };
    /// `(i32, i32) -> i32`: exports taking a buffer.
    pub(crate) const BUFFER: Signature = Signature {
        params: &[Ty::I32, Ty::I32],
        results: &[Ty::I32],
    };
    /// `(i64) -> i32`: exports taking a checkpoint id.
    pub(crate) const CHECKPOINT: Signature = Signature {
        params: &[Ty::I64],
        results: &[Ty::I32],
    };
    /// `(i32, i32)`: imports taking a guest buffer.
    pub(crate) const PTR_LEN: Signature = Signature {
        params: &[Ty::I32, Ty::I32],
        results: &[],
    };
    /// `(i32, i32, i32)`: the `log` import.
    pub(crate) const LOG: Signature = Signature {
        params: &[Ty::I32, Ty::I32, Ty::I32],
        results: &[],
    };
    /// `(i32, i32, i32, i32)`: AssemblyScript's `env.abort` import.
    pub(crate) const ABORT: Signature = Signature {
        params: &[Ty::I32, Ty::I32, Ty::I32, Ty::I32],
        results: &[],
    };

    /// Whether `ty` is exactly this signature.
    pub(crate) fn matches(&self, ty: &FuncType) -> bool {
        ty.params().len() == self.params.len()
            && ty.results().len() == self.results.len()
            && ty
                .params()
                .zip(self.params)
                .all(|(found, want)| want.matches(&found))
            && ty
                .results()
                .zip(self.results)
                .all(|(found, want)| want.matches(&found))
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |ty: &Ty| match ty {
            Ty::I32 => "i32".to_string(),
            Ty::I64 => "i64".to_string(),
        };
        let params: Vec<String> = self.params.iter().map(name).collect();
        let results: Vec<String> = self.results.iter().map(name).collect();
        f.write_str(&render(&params, &results))
    }
}

/// Renders a function type as `a function (i32, i32) -> i32`.
fn render(params: &[String], results: &[String]) -> String {
    let mut text = format!("a function ({})", params.join(", "));
    match results {
        [] => {}
        [one] => text.push_str(&format!(" -> {one}")),
        many => text.push_str(&format!(" -> ({})", many.join(", "))),
    }
    text
}

/// Describes what a module has under some name, for error messages.
pub(crate) fn describe(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(func) => {
            let params: Vec<String> = func.params().map(|t| t.to_string()).collect();
            let results: Vec<String> = func.results().map(|t| t.to_string()).collect();
            render(&params, &results)
        }
        ExternType::Global(_) => "a global".to_string(),
        ExternType::Table(_) => "a table".to_string(),
        ExternType::Memory(_) => "a memory".to_string(),
        ExternType::Tag(_) => "a tag".to_string(),
    }
}
