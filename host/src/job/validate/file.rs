//! The rules of a file source's record format (docs/JOB.md, "File sources"): `format`, the
//! `key`, `value` and `timestamp` fields a format reads (JSON pointers, csv columns), `header`,
//! and `on_error`, which a Kafka source's header mapping shares.

use toml::Spanned;

use super::{MAX_CSV_COLUMN, Validator, first_present, span_of, vertex_key};
use crate::job::error::JobError;
use crate::job::format::{FileFormat, OnError, RecordFields};
use crate::job::spec::SourceSpec;

impl Validator<'_> {
    /// A file source's `format` with its `key`, `value`, `timestamp` and `header`, and its
    /// `on_error`.
    pub(super) fn file_format(
        &self,
        spec: &SourceSpec,
        name: &str,
    ) -> Result<(FileFormat, OnError), JobError> {
        let key = |k: &str| vertex_key(k, "source", name);
        let word = spec
            .format
            .as_ref()
            .map_or("lines", |f| f.get_ref().as_str());
        let fields = [
            ("key", &spec.key),
            ("value", &spec.value),
            ("timestamp", &spec.timestamp),
        ];
        let format = match word {
            "lines" => {
                let keys = fields.iter().map(|(k, f)| (*k, span_of(f))).chain([
                    ("header", span_of(&spec.header)),
                    ("on_error", span_of(&spec.on_error)),
                ]);
                if let Some((k, span)) = first_present(keys) {
                    let fix = match k {
                        "header" => format!(
                            "a header row is a csv thing; set `format = \"csv\"` or remove \
                             `{k}`"
                        ),
                        "on_error" => format!(
                            "every line is a record as it is, so no line is malformed; set \
                             `format = \"jsonl\"` or `format = \"csv\"` to read fields, or \
                             remove `{k}`"
                        ),
                        _ => format!(
                            "a line is read whole, as the value, with an empty key; set \
                             `format = \"jsonl\"` or `format = \"csv\"` to read fields, or \
                             remove `{k}`"
                        ),
                    };
                    return Err(self.needs_setting(span, key(k), "`format = \"lines\"`", fix));
                }
                FileFormat::Lines
            }
            "jsonl" => {
                if let Some(header) = &spec.header {
                    return Err(self.needs_setting(
                        header.span(),
                        key("header"),
                        "`format = \"jsonl\"`",
                        "a header row is a csv thing: every jsonl line is a record; \
                         remove `header`",
                    ));
                }
                let [k, v, t] = fields.map(|(k, f)| {
                    f.as_ref()
                        .map(|f| self.json_pointer(f, key(k), k))
                        .transpose()
                });
                FileFormat::Jsonl(RecordFields {
                    key: k?,
                    value: v?,
                    timestamp: t?,
                })
            }
            "csv" => {
                let [k, v, t] = fields.map(|(k, f)| {
                    f.as_ref()
                        .map(|f| self.csv_column(f, key(k), k))
                        .transpose()
                });
                FileFormat::Csv {
                    fields: RecordFields {
                        key: k?,
                        value: v?,
                        timestamp: t?,
                    },
                    header: spec.header.as_ref().is_some_and(|h| *h.get_ref()),
                }
            }
            other => {
                let format = spec.format.as_ref().expect("a word other than the default");
                return Err(self.bad_value(
                    format.span(),
                    key("format"),
                    format!("{other:?}"),
                    "\"lines\" (a record per line, as it is), \"jsonl\" (a JSON document per \
                     line) or \"csv\" (comma-separated values)",
                ));
            }
        };
        let on_error = match &spec.on_error {
            None => OnError::Fail,
            Some(word) => self.on_error(word, key("on_error"), "a malformed line")?,
        };
        Ok((format, on_error))
    }

    /// A source's `on_error` word; `what` is what it applies to (`a malformed line`).
    pub(super) fn on_error(
        &self,
        word: &Spanned<String>,
        key: String,
        what: &str,
    ) -> Result<OnError, JobError> {
        self.word(
            word,
            key,
            &[("fail", OnError::Fail), ("skip", OnError::Skip)],
            format!(
                "\"fail\" ({what} fails the task) or \"skip\" (it is dropped, counted and \
                 logged)"
            ),
        )
    }

    /// A jsonl field: a JSON pointer (RFC 6901) to a member of each line's document.
    pub(super) fn json_pointer(
        &self,
        field: &Spanned<toml::Value>,
        key: String,
        name: &str,
    ) -> Result<String, JobError> {
        let expected = format!(
            "a JSON pointer starting with \"/\", such as \"/user/id\" (RFC 6901: `~` is \
             written `~0`, a `/` inside a member's name `~1`){}",
            if name == "value" {
                "; leave `value` out for the whole line"
            } else {
                ""
            }
        );
        let toml::Value::String(pointer) = field.get_ref() else {
            return Err(self.bad_value(field.span(), key, field.get_ref().to_string(), expected));
        };
        let escapes_ok = pointer
            .match_indices('~')
            .all(|(i, _)| matches!(pointer.as_bytes().get(i + 1), Some(b'0' | b'1')));
        if !pointer.starts_with('/') || !escapes_ok {
            return Err(self.bad_value(field.span(), key, format!("{pointer:?}"), expected));
        }
        Ok(pointer.clone())
    }

    /// A csv field: a 0-based column index.
    pub(super) fn csv_column(
        &self,
        field: &Spanned<toml::Value>,
        key: String,
        name: &str,
    ) -> Result<usize, JobError> {
        let expected = format!(
            "a column index from 0 to {MAX_CSV_COLUMN}, counted from 0, such as `{name} = 0`: \
             columns are numbered, not named (`header = true` skips a header row)"
        );
        match field.get_ref() {
            toml::Value::Integer(column) if (0..=MAX_CSV_COLUMN as i64).contains(column) => {
                Ok(*column as usize)
            }
            other => Err(self.bad_value(field.span(), key, other.to_string(), expected)),
        }
    }
}
