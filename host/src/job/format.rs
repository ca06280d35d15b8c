//! How a source makes records of what it reads: a file source's [`FileFormat`] and the
//! [`RecordFields`] it takes a record's parts from, and [`OnError`], what a source does with
//! input it cannot make a record of.
//!
//! A module of its own because file and Kafka sources both take [`OnError`]: the Kafka
//! settings ([`super::kafka`]) and the job graph import it from here, so neither imports the
//! other's types back.

/// How a file source turns one line into a record (`format`; docs/JOB.md).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum FileFormat {
    /// `"lines"`: an empty key, the whole line as value, the time it was read as timestamp.
    #[default]
    Lines,
    /// `"jsonl"`: one JSON document per line; the fields are JSON pointers (RFC 6901).
    Jsonl(RecordFields<String>),
    /// `"csv"`: one comma-separated record per line; the fields are 0-based column indices.
    Csv {
        /// Which columns are the key, the value and the timestamp.
        fields: RecordFields<usize>,
        /// The first line names the columns: it is not a record (`header`).
        header: bool,
    },
}

impl FileFormat {
    /// The word a job file writes for it.
    pub fn as_str(&self) -> &'static str {
        match self {
            FileFormat::Lines => "lines",
            FileFormat::Jsonl(_) => "jsonl",
            FileFormat::Csv { .. } => "csv",
        }
    }
}

/// Where a structured line keeps a record's parts; `F` is a JSON pointer or a column.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordFields<F> {
    /// The key's field; `None` = an empty key.
    pub key: Option<F>,
    /// The value's field; `None` = the whole line.
    pub value: Option<F>,
    /// The timestamp's field, an integer of milliseconds; `None` = the line's number.
    pub timestamp: Option<F>,
}

/// What a source does with input it cannot make a record of (`on_error`): a line a file
/// source's format cannot read, a Kafka record without a header its mapping names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum OnError {
    /// `"fail"`: the task fails, naming where the input is (the file and line; the topic,
    /// partition and offset) and the problem.
    #[default]
    Fail,
    /// `"skip"`: the input is dropped, counted (`records_skipped`) and logged; the source's
    /// position moves past it.
    Skip,
}

impl OnError {
    /// The word a job file writes for it.
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Fail => "fail",
            OnError::Skip => "skip",
        }
    }
}
