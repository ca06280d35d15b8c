//! How a compiled module's types are compared with the ABI's signatures (the table in
//! [`weir_abi::table`]) and named in error messages: the only place the host turns the table's
//! plain data into wasmtime types and back.

use wasmtime::{ExternType, FuncType};
use weir_abi::{Signature, ValType};

/// Whether `ty` is exactly `signature`.
pub(crate) fn matches(signature: &Signature, ty: &FuncType) -> bool {
    let same = |want: &ValType, found: wasmtime::ValType| match want {
        ValType::I32 => matches!(found, wasmtime::ValType::I32),
        ValType::I64 => matches!(found, wasmtime::ValType::I64),
    };
    ty.params().len() == signature.params.len()
        && ty.results().len() == signature.results.len()
        && signature
            .params
            .iter()
            .zip(ty.params())
            .all(|(w, f)| same(w, f))
        && signature
            .results
            .iter()
            .zip(ty.results())
            .all(|(w, f)| same(w, f))
}

/// Names `signature` as the load errors do: `a function (i32, i32) -> i32`.
pub(crate) fn function(signature: &Signature) -> String {
    format!("a function {signature}")
}

/// Describes what a module has under some name, in the same words as [`function`]:
/// `a function (i32) -> i32`, `a global`, ….
pub(crate) fn describe(ty: &ExternType) -> String {
    match ty {
        ExternType::Func(func) => {
            let params: Vec<String> = func.params().map(|t| t.to_string()).collect();
            let results: Vec<String> = func.results().map(|t| t.to_string()).collect();
            let mut text = format!("a function ({})", params.join(", "));
            match results.as_slice() {
                [] => {}
                [one] => text.push_str(&format!(" -> {one}")),
                many => text.push_str(&format!(" -> ({})", many.join(", "))),
            }
            text
        }
        ExternType::Global(_) => "a global".to_string(),
        ExternType::Table(_) => "a table".to_string(),
        ExternType::Memory(_) => "a memory".to_string(),
        ExternType::Tag(_) => "a tag".to_string(),
    }
}
