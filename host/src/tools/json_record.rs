//! [`JsonRecord`]: one record as one line of JSON, the format `weir test` reads its input from
//! and writes its output in (`docs/TOOLS.md`).
//!
//! # Why JSON lines
//!
//! An author testing an operator written in C or AssemblyScript has no Rust harness and may have
//! no SDK: what they have is a text editor and a shell. One JSON object per line is easy to write
//! by hand, to generate from a script, to diff and to check into a repository. Keys and values
//! are bytes in the ABI, so a field is either a JSON string (its UTF-8 text) or
//! `{"base64": "..."}` for bytes that are not text. Output uses the same shape, choosing text
//! whenever the bytes are valid UTF-8, so a `weir test` output can be the next operator's input
//! and a record written either way compares equal.
//!
//! The parser reads a line as a generic JSON value first and checks its fields by hand, so that
//! every problem is named precisely ("`timestamp` must be a whole number …") with the line it is
//! on.

use std::fmt;
use std::io::BufRead;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::Serialize;
use serde_json::{Map, Value};

/// One record of a `weir test` input or output: what crosses the ABI for one record (key, value,
/// timestamp), plus the input port of the batch it travels in.
///
/// Displays as its canonical JSON line, with the fields in the order `key`, `value`,
/// `timestamp`, `port`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct JsonRecord {
    /// The record's key; empty when the line has none.
    pub key: Vec<u8>,
    /// The record's value.
    pub value: Vec<u8>,
    /// The record's timestamp, in milliseconds; 0 when the line has none.
    pub timestamp: i64,
    /// The input port the record arrives on; 0 when the line has none, and always 0 in output.
    pub port: u32,
}

/// What is wrong with one input line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    /// The line is not UTF-8 text.
    #[error("the line is not UTF-8 text; write bytes that are not text as {{\"base64\": \"...\"}}")]
    NotUtf8,
    /// The line is not JSON.
    #[error("not valid JSON ({message})")]
    NotJson {
        /// serde_json's description of the error.
        message: String,
    },
    /// The line is JSON, but not an object.
    #[error(
        "expected a JSON object such as {{\"key\": \"k\", \"value\": \"v\", \"timestamp\": 0, \
         \"port\": 0}}, found {found}"
    )]
    NotObject {
        /// What the line holds instead.
        found: String,
    },
    /// The object has a field that is not part of a record.
    #[error(
        "unknown field `{name}`; a record has only `key`, `value`, `timestamp` and `port` (is it \
         misspelt?)"
    )]
    UnknownField {
        /// The field's name.
        name: String,
    },
    /// The object has no `value`.
    #[error("missing `value`; every record needs one (write \"\" for an empty value)")]
    MissingValue,
    /// `key` or `value` is neither a string nor a base64 object.
    #[error(
        "`{field}` must be a string (UTF-8 text) or {{\"base64\": \"...\"}} (bytes), found {found}"
    )]
    NotBytes {
        /// The field: `key` or `value`.
        field: &'static str,
        /// What it holds instead.
        found: String,
    },
    /// `key` or `value` is a base64 object whose text is not valid base64.
    #[error("`{field}` is not valid base64 ({message}); use the standard alphabet with padding")]
    BadBase64 {
        /// The field: `key` or `value`.
        field: &'static str,
        /// The decoder's description of the error.
        message: String,
    },
    /// `timestamp` or `port` is not a whole number in its range.
    #[error("`{field}` must be {expected}, found {found}")]
    BadNumber {
        /// The field: `timestamp` or `port`.
        field: &'static str,
        /// What it must be.
        expected: &'static str,
        /// What it holds instead.
        found: String,
    },
}

/// Reading a file or stream of JSON lines failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum JsonLinesError {
    /// The stream could not be read.
    #[error("cannot read {origin}: {error}")]
    Read {
        /// Where the lines come from: a path, or `stdin`.
        origin: String,
        /// The I/O error.
        #[source]
        error: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("{origin} line {line}: {problem}")]
    Line {
        /// Where the lines come from: a path, or `stdin`.
        origin: String,
        /// The line's number, from 1.
        line: usize,
        /// What is wrong with it.
        problem: LineProblem,
    },
}

impl JsonRecord {
    /// Parses one line of JSON (without its line break).
    pub fn parse(line: &str) -> Result<Self, LineProblem> {
        let value: Value = serde_json::from_str(line).map_err(|e| LineProblem::NotJson {
            message: e.to_string(),
        })?;
        let Value::Object(fields) = value else {
            return Err(LineProblem::NotObject {
                found: describe(&value),
            });
        };
        if let Some(name) = fields
            .keys()
            .find(|name| !matches!(name.as_str(), "key" | "value" | "timestamp" | "port"))
        {
            return Err(LineProblem::UnknownField { name: name.clone() });
        }
        let key = match fields.get("key") {
            None => Vec::new(),
            Some(key) => bytes("key", key)?,
        };
        let value = bytes(
            "value",
            fields.get("value").ok_or(LineProblem::MissingValue)?,
        )?;
        let timestamp = match fields.get("timestamp") {
            None => 0,
            Some(ts) => ts.as_i64().ok_or_else(|| LineProblem::BadNumber {
                field: "timestamp",
                expected: "a whole number of milliseconds (a signed 64-bit integer)",
                found: describe(ts),
            })?,
        };
        let port = match fields.get("port") {
            None => 0,
            Some(port) => port
                .as_u64()
                .and_then(|p| u32::try_from(p).ok())
                .ok_or_else(|| LineProblem::BadNumber {
                    field: "port",
                    expected: "a whole number from 0 to 4294967295",
                    found: describe(port),
                })?,
        };
        Ok(JsonRecord {
            key,
            value,
            timestamp,
            port,
        })
    }

    /// The record as one line of JSON (without a line break): fields in the order `key`,
    /// `value`, `timestamp`, `port`; bytes as text when they are valid UTF-8, else as
    /// `{"base64": "..."}`.
    pub fn to_json(&self) -> String {
        /// The serialized shape of a line.
        #[derive(Serialize)]
        struct Line<'a> {
            key: Bytes<'a>,
            value: Bytes<'a>,
            timestamp: i64,
            port: u32,
        }
        let line = Line {
            key: Bytes::of(&self.key),
            value: Bytes::of(&self.value),
            timestamp: self.timestamp,
            port: self.port,
        };
        // Strings, integers and one-field maps always serialize.
        serde_json::to_string(&line).expect("a record line always serializes")
    }
}

impl fmt::Display for JsonRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_json())
    }
}

/// Reads every record of `reader`, one JSON object per line. Blank lines are skipped (but
/// counted, so errors name the line as an editor shows it). `origin` names the stream in errors:
/// a path, or `stdin`.
pub fn read_json_lines(
    mut reader: impl BufRead,
    origin: &str,
) -> Result<Vec<JsonRecord>, JsonLinesError> {
    let mut records = Vec::new();
    let mut buffer = Vec::new();
    let mut line = 0;
    loop {
        buffer.clear();
        let read = reader
            .read_until(b'\n', &mut buffer)
            .map_err(|error| JsonLinesError::Read {
                origin: origin.to_string(),
                error,
            })?;
        if read == 0 {
            return Ok(records);
        }
        line += 1;
        let failed = |problem| JsonLinesError::Line {
            origin: origin.to_string(),
            line,
            problem,
        };
        let text = std::str::from_utf8(&buffer).map_err(|_| failed(LineProblem::NotUtf8))?;
        let text = text.trim();
        if text.is_empty() {
            continue;
        }
        records.push(JsonRecord::parse(text).map_err(failed)?);
    }
}

/// Bytes as serialized in a line: text, or a base64 object.
#[derive(Serialize)]
#[serde(untagged)]
enum Bytes<'a> {
    /// Valid UTF-8.
    Text(&'a str),
    /// Anything else.
    Base64 {
        /// The standard base64 encoding, padded.
        base64: String,
    },
}

impl<'a> Bytes<'a> {
    fn of(bytes: &'a [u8]) -> Self {
        match std::str::from_utf8(bytes) {
            Ok(text) => Bytes::Text(text),
            Err(_) => Bytes::Base64 {
                base64: BASE64.encode(bytes),
            },
        }
    }
}

/// The bytes of `key` or `value`: a string's UTF-8, or a base64 object's decoded bytes.
fn bytes(field: &'static str, value: &Value) -> Result<Vec<u8>, LineProblem> {
    match value {
        Value::String(text) => Ok(text.as_bytes().to_vec()),
        Value::Object(object) => {
            let text = base64_text(object).ok_or_else(|| LineProblem::NotBytes {
                field,
                found: "an object other than {\"base64\": \"...\"}".to_string(),
            })?;
            BASE64.decode(text).map_err(|e| LineProblem::BadBase64 {
                field,
                message: e.to_string(),
            })
        }
        other => Err(LineProblem::NotBytes {
            field,
            found: describe(other),
        }),
    }
}

/// The text of `{"base64": "..."}`, when `object` is exactly that.
fn base64_text(object: &Map<String, Value>) -> Option<&str> {
    match object.get("base64") {
        Some(Value::String(text)) if object.len() == 1 => Some(text),
        _ => None,
    }
}

/// Names what a JSON value is, for error messages.
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(_) => "a string".to_string(),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(key: &[u8], value: &[u8], timestamp: i64, port: u32) -> JsonRecord {
        JsonRecord {
            key: key.to_vec(),
            value: value.to_vec(),
            timestamp,
            port,
        }
    }

    #[test]
    fn parses_text_fields_and_defaults_the_optional_ones() {
        assert_eq!(
            JsonRecord::parse(r#"{"key": "a", "value": "x y", "timestamp": -5, "port": 2}"#),
            Ok(record(b"a", b"x y", -5, 2))
        );
        assert_eq!(
            JsonRecord::parse(r#"{"value": "v"}"#),
            Ok(record(b"", b"v", 0, 0))
        );
        assert_eq!(
            JsonRecord::parse(r#"{"value": "h\u00e9"}"#),
            Ok(record(b"", "hé".as_bytes(), 0, 0))
        );
    }

    #[test]
    fn parses_base64_fields_as_bytes() {
        assert_eq!(
            JsonRecord::parse(r#"{"key": {"base64": "AP8="}, "value": {"base64": ""}}"#),
            Ok(record(&[0, 255], b"", 0, 0))
        );
    }

    #[test]
    fn writes_text_when_utf8_and_base64_otherwise_in_a_fixed_field_order() {
        assert_eq!(
            record(b"k", b"1", 7, 0).to_json(),
            r#"{"key":"k","value":"1","timestamp":7,"port":0}"#
        );
        assert_eq!(
            record(&[0xff, 0], "é".as_bytes(), 0, 3).to_json(),
            r#"{"key":{"base64":"/wA="},"value":"é","timestamp":0,"port":3}"#
        );
    }

    #[test]
    fn round_trips_any_bytes() {
        let all: Vec<u8> = (0..=255).collect();
        let samples = [
            record(&all, &all[..3], i64::MIN, u32::MAX),
            record(b"", b"", i64::MAX, 0),
            record("ключ".as_bytes(), b"\"quoted\"\n\\", 1, 1),
        ];
        for sample in samples {
            assert_eq!(JsonRecord::parse(&sample.to_json()), Ok(sample));
        }
    }

    #[test]
    fn names_each_problem() {
        let problem = |line: &str| JsonRecord::parse(line).unwrap_err();
        assert!(matches!(
            problem("{\"value\": "),
            LineProblem::NotJson { .. }
        ));
        assert_eq!(
            problem("[1]"),
            LineProblem::NotObject {
                found: "an array".into()
            }
        );
        assert_eq!(
            problem(r#"{"value": "v", "val": 1}"#),
            LineProblem::UnknownField { name: "val".into() }
        );
        assert_eq!(problem(r#"{"key": "k"}"#), LineProblem::MissingValue);
        assert_eq!(
            problem(r#"{"value": 5}"#),
            LineProblem::NotBytes {
                field: "value",
                found: "the number 5".into()
            }
        );
        assert!(matches!(
            problem(r#"{"value": {"base64": "v", "x": 1}}"#),
            LineProblem::NotBytes { field: "value", .. }
        ));
        assert!(matches!(
            problem(r#"{"key": {"base64": "!!"}, "value": ""}"#),
            LineProblem::BadBase64 { field: "key", .. }
        ));
        assert!(matches!(
            problem(r#"{"value": "", "timestamp": 1.5}"#),
            LineProblem::BadNumber {
                field: "timestamp",
                ..
            }
        ));
        assert!(matches!(
            problem(r#"{"value": "", "port": -1}"#),
            LineProblem::BadNumber { field: "port", .. }
        ));
        assert!(matches!(
            problem(r#"{"value": "", "port": 4294967296}"#),
            LineProblem::BadNumber { field: "port", .. }
        ));
    }

    #[test]
    fn reads_lines_skipping_blank_ones_and_names_the_bad_line() {
        let input = "{\"value\": \"a\"}\n\n  \r\n{\"value\": \"b\"}\r\n";
        let records = read_json_lines(input.as_bytes(), "in.jsonl").unwrap();
        assert_eq!(
            records,
            vec![record(b"", b"a", 0, 0), record(b"", b"b", 0, 0)]
        );

        let input = "{\"value\": \"a\"}\n\n{\"value\": 1}\n";
        let err = read_json_lines(input.as_bytes(), "in.jsonl").unwrap_err();
        assert!(
            matches!(err, JsonLinesError::Line { line: 3, .. }),
            "{err:?}"
        );
        assert!(
            err.to_string()
                .starts_with("in.jsonl line 3: `value` must be"),
            "{err}"
        );

        let err = read_json_lines(&b"{\"value\": \"\xff\"}"[..], "stdin").unwrap_err();
        assert!(matches!(
            err,
            JsonLinesError::Line {
                line: 1,
                problem: LineProblem::NotUtf8,
                ..
            }
        ));
    }
}
