//! The `file` source: one record per line of a text file; its position is the
//! byte offset of the first line not yet emitted, with that line's number. With
//! `follow`, it tails a growing file instead of ending at its end.
//!
//! How a line becomes a record is its [`FileFormat`]: the whole line (`lines`), or fields of a
//! JSON document (`jsonl`) or of comma-separated values (`csv`). A line the format cannot read
//! fails the task or is skipped, counted and logged, as [`OnError`] says.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::connector::{SourceConnector, TaskContext};
use super::record::decode_u64_position;
use super::skip_log::SkipLog;
use crate::dataflow::error::{ConnectorFailure, TaskError};
use crate::dataflow::metrics::TaskMetrics;
use crate::dataflow::processor::{Source, SourceOutput, SourcePoll};
use crate::job::{FileFormat, OnError, RecordFields};

/// How long a followed file is left alone when it has nothing new.
const FOLLOW_IDLE: Duration = Duration::from_millis(100);

/// The `file` source, with its settings. It has no rescale rule: a file source runs at
/// parallelism 1.
pub(crate) struct Connector<'a> {
    /// The file.
    pub(crate) path: &'a Path,
    /// Whether it tails the file.
    pub(crate) follow: bool,
    /// How a line becomes a record.
    pub(crate) format: &'a FileFormat,
    /// What a line the format cannot read does.
    pub(crate) on_error: OnError,
}

impl SourceConnector for Connector<'_> {
    fn build(&self, task: TaskContext<'_>) -> Box<dyn Source> {
        Box::new(FileSource::new(
            self.path.to_path_buf(),
            self.follow,
            self.format.clone(),
            self.on_error,
            task.metrics,
        ))
    }
}

/// Why a file source stopped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FileSourceError {
    /// The file source could not open, seek in or read its file: check that the file
    /// exists and is readable.
    #[error("file source {}: {what}: {source}", path.display())]
    Io {
        /// The file it reads.
        path: PathBuf,
        /// What it was doing, such as `cannot read`.
        what: &'static str,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A line of the file source's file is not what its `format` reads, and its `on_error`
    /// is `fail`.
    #[error(
        "file source {}: line {line} is not a {format} record: {problem} (fix the line, or set \
         `on_error = \"skip\"` on the source to drop such lines)",
        path.display()
    )]
    MalformedLine {
        /// The file it reads.
        path: PathBuf,
        /// The line's number, from 1.
        line: u64,
        /// The source's `format`.
        format: &'static str,
        /// What is wrong with the line.
        problem: String,
    },
}

impl ConnectorFailure for FileSourceError {
    fn connector(&self) -> &'static str {
        "file"
    }
}

/// Reads lines of a file. With `lines`, records have an empty key, the line (without its line
/// ending) as value and the time it was read (ms since the epoch) as timestamp; the other
/// formats take them from the line's fields (see [`Decoder`]).
#[derive(Debug)]
pub(crate) struct FileSource {
    path: PathBuf,
    follow: bool,
    on_error: OnError,
    decoder: Decoder,
    metrics: Arc<TaskMetrics>,
    reader: Option<BufReader<File>>,
    /// Byte offset of the next line to emit.
    offset: u64,
    /// Lines before `offset`; `None` after a restore from a position without it, until the
    /// file is opened and they are counted.
    lines_before: Option<u64>,
    line: Vec<u8>,
    skips: SkipLog,
}

impl FileSource {
    /// A source reading `path` from its start, counting skipped lines in `metrics`.
    pub(crate) fn new(
        path: PathBuf,
        follow: bool,
        format: FileFormat,
        on_error: OnError,
        metrics: Arc<TaskMetrics>,
    ) -> Self {
        FileSource {
            follow,
            on_error,
            decoder: Decoder::new(format),
            metrics,
            reader: None,
            offset: 0,
            lines_before: Some(0),
            skips: SkipLog::new(
                "file source",
                format!("malformed lines of {}", path.display()),
            ),
            path,
            line: Vec::new(),
        }
    }

    fn io_error(&self, what: &'static str, e: std::io::Error) -> TaskError {
        FileSourceError::Io {
            path: self.path.clone(),
            what,
            source: e,
        }
        .into()
    }

    /// Opens the file at `offset`, counting the lines before it if they are not known.
    fn open(&mut self) -> Result<bool, TaskError> {
        // Looked at before it is opened: opening a FIFO with no writer blocks until one comes,
        // and nothing (a stop, a cancel) could end the task meanwhile. The job file's check
        // refuses one at start; this catches a path that became one since (a followed file).
        if let Ok(meta) = std::fs::metadata(&self.path)
            && !meta.is_file()
        {
            let kind = crate::wasm::file_kind(&meta.file_type());
            return Err(self.io_error(
                "cannot read",
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "it is {kind}, not a regular file: a file source starts again from a \
                         byte offset after a failure, which only a regular file gives back"
                    ),
                ),
            ));
        }
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if self.follow && e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(false);
            }
            Err(e) => return Err(self.io_error("cannot open", e)),
        };
        if self.lines_before.is_none() {
            let counted = count_lines(&mut file, self.offset)
                .map_err(|e| self.io_error("cannot count the lines before its position", e))?;
            self.lines_before = Some(counted);
        }
        file.seek(SeekFrom::Start(self.offset))
            .map_err(|e| self.io_error("cannot seek", e))?;
        self.reader = Some(BufReader::with_capacity(64 * 1024, file));
        Ok(true)
    }
}

impl Source for FileSource {
    fn poll(&mut self, out: &mut SourceOutput<'_>, max: usize) -> Result<SourcePoll, TaskError> {
        if self.reader.is_none() && !self.open()? {
            return Ok(SourcePoll::Idle(FOLLOW_IDLE));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        for _ in 0..max {
            self.line.clear();
            let reader = self.reader.as_mut().expect("opened above");
            let n = reader
                .read_until(b'\n', &mut self.line)
                .map_err(|e| self.io_error("cannot read", e))?;
            if n == 0 {
                self.skips.flush();
                return Ok(if self.follow {
                    SourcePoll::Idle(FOLLOW_IDLE)
                } else {
                    SourcePoll::Exhausted
                });
            }
            if self.line.last() != Some(&b'\n') && self.follow {
                // A line still being written: read it again, whole, later.
                self.reader = None;
                return Ok(SourcePoll::Idle(FOLLOW_IDLE));
            }
            self.offset += n as u64;
            let number = self.lines_before.expect("counted on open") + 1;
            self.lines_before = Some(number);
            let mut line = self.line.as_slice();
            if let Some(rest) = line.strip_suffix(b"\n") {
                line = rest.strip_suffix(b"\r").unwrap_or(rest);
            }
            match self.decoder.decode(line, number) {
                Decoded::Record(key, value, timestamp) => {
                    out.push(key, value, timestamp.unwrap_or(now))?
                }
                Decoded::Header => {}
                Decoded::Malformed(problem) => match self.on_error {
                    OnError::Fail => {
                        return Err(FileSourceError::MalformedLine {
                            path: self.path.clone(),
                            line: number,
                            format: self.decoder.format.as_str(),
                            problem,
                        }
                        .into());
                    }
                    OnError::Skip => {
                        self.metrics.add_records_skipped(1);
                        self.skips.skipped(
                            format_args!("malformed line {number} of {}", self.path.display()),
                            format_args!("line {number}"),
                            &problem,
                        );
                    }
                },
            }
        }
        Ok(SourcePoll::Emitted)
    }

    /// The offset of the next line and the number of lines before it, 16 bytes.
    fn position(&self) -> Vec<u8> {
        let mut position = self.offset.to_le_bytes().to_vec();
        // Known whenever a line was read since a restore; otherwise counted at the next open.
        if let Some(lines) = self.lines_before {
            position.extend_from_slice(&lines.to_le_bytes());
        }
        position
    }

    /// Takes a position of 16 bytes, or of 8 (the offset alone, as positions were before line
    /// numbers: the lines before it are then counted when the file is opened).
    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError> {
        let (offset, lines) = match position.len() {
            16 => (
                decode_u64_position("file source", &position[..8])?,
                Some(decode_u64_position("file source", &position[8..])?),
            ),
            _ => (decode_u64_position("file source", position)?, None),
        };
        self.offset = offset;
        self.lines_before = lines;
        self.reader = None;
        self.skips.reset();
        Ok(())
    }
}

/// The number of line endings in the first `len` bytes of `file`.
fn count_lines(file: &mut File, len: u64) -> std::io::Result<u64> {
    file.seek(SeekFrom::Start(0))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut rest = len;
    let mut lines = 0u64;
    while rest > 0 {
        let want = buf.len().min(usize::try_from(rest).unwrap_or(usize::MAX));
        let n = file.read(&mut buf[..want])?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|&&b| b == b'\n').count() as u64;
        rest -= n as u64;
    }
    Ok(lines)
}

/// What a line is to its format.
#[derive(Debug)]
enum Decoded<'a> {
    /// A record: key, value, and timestamp (`None` = the time it was read).
    Record(&'a [u8], &'a [u8], Option<i64>),
    /// A csv header row: no record.
    Header,
    /// A line the format cannot read, and why.
    Malformed(String),
}

/// Turns lines into records, with buffers reused from line to line.
///
/// - `lines`: an empty key, the line as value, no timestamp (the time it is read). No copy.
/// - `jsonl`: the line is a JSON document; a field is the member its pointer names. A JSON
///   string becomes its UTF-8 text, without quotes or escapes; any other value (number,
///   boolean, null, array, object) its compact JSON text. An absent `key` field = an empty key;
///   an absent `value` field = the whole line; an absent `timestamp` field = the line's number.
///   A timestamp must be a JSON integer (milliseconds).
/// - `csv`: the line is one RFC 4180 record (quoted fields may hold commas and doubled quotes,
///   but not line endings); a field is a 0-based column, taken as it is once unquoted. The
///   timestamp column must hold a decimal integer. With `header`, line 1 is not a record.
#[derive(Debug)]
struct Decoder {
    format: FileFormat,
    /// The key and value of a jsonl record that are not strings, as JSON text.
    key: Vec<u8>,
    value: Vec<u8>,
    csv: csv_core::Reader,
    /// The unquoted fields of a csv line, end to end, and where each ends.
    fields: Vec<u8>,
    ends: Vec<usize>,
}

impl Decoder {
    fn new(format: FileFormat) -> Self {
        Decoder {
            format,
            key: Vec::new(),
            value: Vec::new(),
            csv: csv_core::Reader::new(),
            fields: Vec::new(),
            ends: Vec::new(),
        }
    }

    /// Line `number` (1-based) as a record of the format.
    fn decode<'a>(&'a mut self, line: &'a [u8], number: u64) -> Decoded<'a> {
        let line_number = i64::try_from(number).unwrap_or(i64::MAX);
        match &self.format {
            FileFormat::Lines => Decoded::Record(b"", line, None),
            FileFormat::Jsonl(fields) => {
                match decode_json(line, fields, &mut self.key, &mut self.value) {
                    Ok(JsonRecord {
                        key,
                        value,
                        timestamp,
                    }) => {
                        let key = if key { &self.key[..] } else { b"" };
                        let value = if value { &self.value[..] } else { line };
                        Decoded::Record(key, value, Some(timestamp.unwrap_or(line_number)))
                    }
                    Err(problem) => Decoded::Malformed(problem),
                }
            }
            FileFormat::Csv { fields, header } => {
                if *header && number == 1 {
                    return Decoded::Header;
                }
                let fields = fields.clone();
                match self.split_csv(line) {
                    Ok(count) => self.csv_record(line, &fields, count, line_number),
                    Err(problem) => Decoded::Malformed(problem),
                }
            }
        }
    }

    /// Splits a csv line into `fields` and `ends`; returns how many fields it has.
    fn split_csv(&mut self, line: &[u8]) -> Result<usize, String> {
        if line.is_empty() {
            return Err("an empty line: no columns".into());
        }
        // Unquoting never lengthens a field; a line has at most one field more than commas.
        if self.fields.len() < line.len() + 1 {
            self.fields.resize(line.len() + 1, 0);
        }
        if self.ends.len() < line.len() + 2 {
            self.ends.resize(line.len() + 2, 0);
        }
        self.csv.reset();
        let (_, _, nout, nend) = self.csv.read_record(line, &mut self.fields, &mut self.ends);
        // The line ending ends the record, unless a quoted field is still open: then it is
        // taken as part of that field and the record goes on.
        let (result, _, _, more) =
            self.csv
                .read_record(b"\n", &mut self.fields[nout..], &mut self.ends[nend..]);
        match result {
            csv_core::ReadRecordResult::Record => Ok(nend + more),
            csv_core::ReadRecordResult::InputEmpty => Err(
                "a quoted field is not closed on its line (a field cannot span lines; write a \
                 line ending inside a field as an escape of your own)"
                    .into(),
            ),
            other => Err(format!("not a csv record ({other:?})")),
        }
    }

    fn csv_record<'a>(
        &'a self,
        line: &'a [u8],
        fields: &RecordFields<usize>,
        count: usize,
        line_number: i64,
    ) -> Decoded<'a> {
        let column = |index: usize, what: &str| -> Result<&'a [u8], String> {
            if index >= count {
                return Err(format!(
                    "the {what} is column {index}, but the line has {count} column{} (columns \
                     are counted from 0)",
                    if count == 1 { "" } else { "s" }
                ));
            }
            let start = if index == 0 { 0 } else { self.ends[index - 1] };
            Ok(&self.fields[start..self.ends[index]])
        };
        let key = match fields.key.map(|i| column(i, "key")).transpose() {
            Ok(key) => key.unwrap_or(b""),
            Err(problem) => return Decoded::Malformed(problem),
        };
        let value = match fields.value.map(|i| column(i, "value")).transpose() {
            Ok(value) => value.unwrap_or(line),
            Err(problem) => return Decoded::Malformed(problem),
        };
        let timestamp = match fields.timestamp {
            None => line_number,
            Some(index) => {
                let text = match column(index, "timestamp") {
                    Ok(text) => text,
                    Err(problem) => return Decoded::Malformed(problem),
                };
                match std::str::from_utf8(text).ok().and_then(|t| t.parse().ok()) {
                    Some(ms) => ms,
                    None => {
                        return Decoded::Malformed(format!(
                            "the timestamp (column {index}) is {:?}, not an integer of \
                             milliseconds",
                            String::from_utf8_lossy(text)
                        ));
                    }
                }
            }
        };
        Decoded::Record(key, value, Some(timestamp))
    }
}

/// A decoded jsonl line: whether its key and value are in the decoder's buffers (else an
/// empty key, the whole line), and its timestamp field.
#[derive(Debug)]
struct JsonRecord {
    key: bool,
    value: bool,
    timestamp: Option<i64>,
}

/// Reads the fields of one jsonl line; a string or other value goes to `key` or `value`.
fn decode_json(
    line: &[u8],
    fields: &RecordFields<String>,
    key: &mut Vec<u8>,
    value: &mut Vec<u8>,
) -> Result<JsonRecord, String> {
    let document: serde_json::Value = serde_json::from_slice(line).map_err(|e| {
        if line.iter().all(u8::is_ascii_whitespace) {
            "an empty line, not a JSON document".to_owned()
        } else {
            // The line is the whole input, so say only the column (its line is in the message).
            let text = e.to_string();
            let at = format!(" at line {} column {}", e.line(), e.column());
            format!(
                "not JSON at column {}: {}",
                e.column(),
                text.strip_suffix(&at).unwrap_or(&text)
            )
        }
    })?;
    let member = |pointer: &str, what: &str| {
        document
            .pointer(pointer)
            .ok_or_else(|| format!("no {what}: the document has nothing at {pointer}"))
    };
    let part = |pointer: &Option<String>, what: &str, buffer: &mut Vec<u8>| {
        let Some(pointer) = pointer else {
            return Ok(false);
        };
        buffer.clear();
        match member(pointer, what)? {
            serde_json::Value::String(text) => buffer.extend_from_slice(text.as_bytes()),
            other => serde_json::to_writer(&mut *buffer, other)
                .map_err(|e| format!("cannot write the {what} at {pointer} as JSON: {e}"))?,
        }
        Ok::<_, String>(true)
    };
    let key_part = part(&fields.key, "key", key)?;
    let value_part = part(&fields.value, "value", value)?;
    let timestamp = match &fields.timestamp {
        None => None,
        Some(pointer) => {
            let found = member(pointer, "timestamp")?;
            Some(found.as_i64().ok_or_else(|| {
                format!("the timestamp at {pointer} is {found}, not an integer of milliseconds")
            })?)
        }
    };
    Ok(JsonRecord {
        key: key_part,
        value: value_part,
        timestamp,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use weir_abi::Batch;

    use super::*;
    use crate::dataflow::channel::StopSignal;
    use crate::dataflow::message::Message;
    use crate::dataflow::router::{OutputEdge, Router};
    use crate::job::Partitioner;

    #[test]
    fn its_failures_name_the_source_its_file_and_what_it_was_doing() {
        let error = TaskError::from(FileSourceError::Io {
            path: PathBuf::from("/in/lines.txt"),
            what: "cannot open",
            source: std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied"),
        });
        assert_eq!(
            error.to_string(),
            "file source /in/lines.txt: cannot open: permission denied"
        );
        assert!(
            format!("{error:?}").starts_with("Connector(ConnectorError { connector: \"file\", "),
            "{error:?}"
        );
        // The I/O error stays reachable as the source, for whoever needs its kind.
        assert_eq!(
            crate::dataflow::error::io_source_kind(&error),
            Some(std::io::ErrorKind::PermissionDenied)
        );
    }

    type Record = (String, String, i64);

    /// A file holding `text`, kept as long as the returned guard.
    fn file(text: &str) -> tempfile::NamedTempFile {
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    fn source(path: &std::path::Path, format: FileFormat, on_error: OnError) -> FileSource {
        FileSource::new(
            path.to_owned(),
            false,
            format,
            on_error,
            Arc::new(TaskMetrics::default()),
        )
    }

    /// Polls `source` `max` records at a time until it ends, or only `polls` times.
    fn read(
        source: &mut FileSource,
        max: usize,
        polls: Option<usize>,
    ) -> Result<Vec<Record>, TaskError> {
        let (tx, rx) = crossbeam_channel::unbounded();
        let mut router = Router::new(
            vec![OutputEdge::new(Partitioner::Forward, 0, vec![tx.into()])],
            StopSignal::new(),
            Arc::default(),
        );
        let mut left = polls.unwrap_or(usize::MAX);
        let mut outcome = Ok(());
        while left > 0 {
            left -= 1;
            match source.poll(&mut SourceOutput::new(&mut router, None), max) {
                Ok(SourcePoll::Exhausted) => break,
                Ok(_) => {}
                Err(e) => {
                    outcome = Err(e);
                    break;
                }
            }
        }
        router.flush().unwrap();
        let mut records = Vec::new();
        while let Ok(Message::Batch(bytes)) = rx.try_recv() {
            for r in Batch::decode(&bytes).unwrap().iter() {
                records.push((
                    String::from_utf8(r.key.to_vec()).unwrap(),
                    String::from_utf8(r.value.to_vec()).unwrap(),
                    r.timestamp,
                ));
            }
        }
        outcome.map(|()| records)
    }

    fn jsonl(key: Option<&str>, value: Option<&str>, timestamp: Option<&str>) -> FileFormat {
        FileFormat::Jsonl(RecordFields {
            key: key.map(str::to_owned),
            value: value.map(str::to_owned),
            timestamp: timestamp.map(str::to_owned),
        })
    }

    fn csv(
        key: Option<usize>,
        value: Option<usize>,
        timestamp: Option<usize>,
        header: bool,
    ) -> FileFormat {
        FileFormat::Csv {
            fields: RecordFields {
                key,
                value,
                timestamp,
            },
            header,
        }
    }

    fn rec(key: &str, value: &str, timestamp: i64) -> Record {
        (key.to_owned(), value.to_owned(), timestamp)
    }

    #[test]
    fn lines_are_whole_values_with_an_empty_key_stamped_when_read() {
        let f = file("a b\r\n\nlast");
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        let records = read(
            &mut source(f.path(), FileFormat::Lines, OnError::Fail),
            10,
            None,
        )
        .unwrap();
        let values: Vec<_> = records
            .iter()
            .map(|(k, v, _)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(values, [("", "a b"), ("", ""), ("", "last")]);
        assert!(records.iter().all(|(_, _, t)| *t >= before));
    }

    #[test]
    fn jsonl_fields_are_strings_as_text_and_other_values_as_json() {
        let f = file(concat!(
            r#"{"user":{"id":"ann"},"n":3,"at":1700000000000}"#,
            "\n",
            r#"{"user":{"id":7},"n":{"b":[1, true, null]},"at":-5}"#,
            "\n",
            r#"{"user":{"id":"tab\tq\"é"},"n":false,"at":0}"#,
            "\n",
            r#"{"user":{"id":null},"n":2.5,"at":1}"#,
            "\n",
        ));
        let format = jsonl(Some("/user/id"), Some("/n"), Some("/at"));
        let records = read(&mut source(f.path(), format, OnError::Fail), 10, None).unwrap();
        assert_eq!(
            records,
            [
                rec("ann", "3", 1_700_000_000_000),
                rec("7", r#"{"b":[1,true,null]}"#, -5),
                rec("tab\tq\"é", "false", 0),
                rec("null", "2.5", 1),
            ]
        );
    }

    #[test]
    fn jsonl_without_value_or_timestamp_fields_takes_the_line_and_its_number() {
        let line = r#"{"k": "a",  "v": 1}"#;
        let f = file(&format!("{line}\n{line}\r\n"));
        let records = read(
            &mut source(f.path(), jsonl(Some("/k"), None, None), OnError::Fail),
            10,
            None,
        )
        .unwrap();
        assert_eq!(records, [rec("a", line, 1), rec("a", line, 2)]);
        // Pointers escape `~` and `/` in member names (RFC 6901).
        let f = file("{\"a/b\": {\"c~d\": \"x\"}, \"list\": [\"p\", \"q\"]}\n");
        let records = read(
            &mut source(
                f.path(),
                jsonl(Some("/a~1b/c~0d"), Some("/list/1"), None),
                OnError::Fail,
            ),
            10,
            None,
        )
        .unwrap();
        assert_eq!(records, [rec("x", "q", 1)]);
    }

    /// The message a malformed line fails the task with.
    fn failure(text: &str, format: FileFormat) -> String {
        let f = file(text);
        let error = read(&mut source(f.path(), format, OnError::Fail), 10, None).unwrap_err();
        let message = error.to_string();
        let prefix = format!("file source {}: line ", f.path().display());
        assert!(message.starts_with(&prefix), "{message}");
        assert!(
            message.ends_with(
                "(fix the line, or set `on_error = \"skip\"` on the source to drop such lines)"
            ),
            "{message}"
        );
        message[prefix.len()..].to_owned()
    }

    #[test]
    fn a_malformed_jsonl_line_fails_naming_the_file_the_line_and_the_problem() {
        let good = "{\"k\":\"a\",\"t\":1}\n";
        let format = || jsonl(Some("/k"), None, Some("/t"));
        let cases = [
            (
                "{\"k\":\"a\",",
                "2 is not a jsonl record: not JSON at column 9: EOF while parsing a value",
            ),
            (
                "{\"t\":1}",
                "2 is not a jsonl record: no key: the document has nothing at /k",
            ),
            (
                "{\"k\":\"a\",\"t\":1.5}",
                "2 is not a jsonl record: the timestamp at /t is 1.5, not an integer of milliseconds",
            ),
            (
                "{\"k\":\"a\",\"t\":\"17\"}",
                "2 is not a jsonl record: the timestamp at /t is \"17\", not an integer of milliseconds",
            ),
            (
                "{\"k\":\"a\",\"t\":18446744073709551615}",
                "2 is not a jsonl record: the timestamp at /t is 18446744073709551615, not an integer of milliseconds",
            ),
            (
                "   ",
                "2 is not a jsonl record: an empty line, not a JSON document",
            ),
        ];
        for (bad, expected) in cases {
            let message = failure(&format!("{good}{bad}\n{good}"), format());
            assert!(message.starts_with(expected), "{bad}: {message}");
        }
        let message = failure(
            &format!("{good}{{\"k\":\"a\"}}\n"),
            jsonl(None, Some("/v"), None),
        );
        assert!(
            message
                .starts_with("1 is not a jsonl record: no value: the document has nothing at /v"),
            "{message}"
        );
    }

    #[test]
    fn csv_columns_are_unquoted_and_a_header_is_not_a_record() {
        let f = file(concat!(
            "amount,stamp,user\n",
            "3,100,ann\n",
            "\"1,5\",200,\"bo \"\"b\"\"\"\n",
            "7,300,\r\n",
            "9,-4,\"\"\n",
        ));
        let records = read(
            &mut source(
                f.path(),
                csv(Some(2), Some(0), Some(1), true),
                OnError::Fail,
            ),
            10,
            None,
        )
        .unwrap();
        assert_eq!(
            records,
            [
                rec("ann", "3", 100),
                rec("bo \"b\"", "1,5", 200),
                rec("", "7", 300),
                rec("", "9", -4)
            ]
        );
        // Without a header and a timestamp column: line 1 is a record, stamped with its number;
        // without a value column, the value is the whole line as written.
        let f = file("a,\"x,y\"\nb,z\n");
        let records = read(
            &mut source(f.path(), csv(Some(0), None, None, false), OnError::Fail),
            10,
            None,
        )
        .unwrap();
        assert_eq!(records, [rec("a", "a,\"x,y\"", 1), rec("b", "b,z", 2)]);
    }

    #[test]
    fn the_failure_shown_in_job_md_is_the_one_the_source_gives() {
        let f = file("{\"page\": \"/home\"}\n");
        let format = jsonl(Some("/user/id"), Some("/page"), None);
        let error = read(&mut source(f.path(), format, OnError::Fail), 10, None).unwrap_err();
        let shown = error
            .to_string()
            .replace(&f.path().display().to_string(), "/data/events.jsonl")
            .replace("line 1 ", "line 17 ");
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/JOB.md"))
            .unwrap();
        assert!(doc.contains(&shown), "docs/JOB.md should show:\n{shown}");
    }

    #[test]
    fn a_malformed_csv_line_fails_naming_the_file_the_line_and_the_problem() {
        let format = || csv(Some(1), Some(0), Some(2), false);
        let cases = [
            (
                "a,b",
                "2 is not a csv record: the timestamp is column 2, but the line has 2 columns (columns are counted from 0)",
            ),
            (
                "a",
                "2 is not a csv record: the key is column 1, but the line has 1 column (columns are counted from 0)",
            ),
            (
                "a,b,12x",
                "2 is not a csv record: the timestamp (column 2) is \"12x\", not an integer of milliseconds",
            ),
            (
                "a,\"b,1",
                "2 is not a csv record: a quoted field is not closed on its line",
            ),
            ("", "2 is not a csv record: an empty line: no columns"),
        ];
        for (bad, expected) in cases {
            let message = failure(&format!("v,k,1\n{bad}\nv,k,3\n"), format());
            assert!(message.starts_with(expected), "{bad:?}: {message}");
        }
    }

    #[test]
    fn skipped_lines_are_dropped_counted_and_keep_the_line_numbers() {
        let f = file("{\"k\":\"a\"}\nnot json\n{\"k\":\"b\"}\n{}\n{\"k\":\"c\"}\n");
        let mut source = source(f.path(), jsonl(Some("/k"), Some("/k"), None), OnError::Skip);
        let records = read(&mut source, 10, None).unwrap();
        assert_eq!(
            records,
            [rec("a", "a", 1), rec("b", "b", 3), rec("c", "c", 5)]
        );
        assert_eq!(source.metrics.records_skipped(), 2);
    }

    /// The whole file read once, and read again from every position it passed, are the same
    /// records; a position taken after `k` polls of one record each resumes at record `k`.
    #[track_caller]
    fn check_every_restore(text: &str, format: FileFormat, on_error: OnError) {
        let f = file(text);
        // `lines` stamps records with the time they are read, which a restore cannot repeat.
        let read = |source: &mut FileSource, max, polls| {
            let mut records = read(source, max, polls).unwrap();
            if format == FileFormat::Lines {
                records.iter_mut().for_each(|r| r.2 = 0);
            }
            records
        };
        let whole = read(&mut source(f.path(), format.clone(), on_error), 1000, None);
        let mut first = source(f.path(), format.clone(), on_error);
        let mut before = Vec::new();
        loop {
            let position = first.position();
            let mut restored = source(f.path(), format.clone(), on_error);
            restored.seek(&position).unwrap();
            let rest = read(&mut restored, 3, None);
            assert_eq!(
                [before.clone(), rest].concat(),
                whole,
                "restored at {position:?}"
            );
            // Positions from before line numbers (the offset alone) resume the same way.
            let mut legacy = source(f.path(), format.clone(), on_error);
            legacy.seek(&position[..8]).unwrap();
            assert_eq!(
                legacy.position(),
                position[..8],
                "nothing counted before the file opens"
            );
            let rest = read(&mut legacy, 3, None);
            assert_eq!(
                [before.clone(), rest].concat(),
                whole,
                "restored at offset {:?}",
                &position[..8]
            );
            if before.len() == whole.len() && first.offset == text.len() as u64 {
                break;
            }
            before.extend(read(&mut first, 1, Some(1)));
        }
    }

    #[test]
    fn a_restore_mid_file_resumes_at_the_same_record_with_skipped_lines() {
        let text = "{\"k\":\"a\",\"v\":1}\nbad\n\n{\"k\":\"b\"}\n{\"k\":\"c\",\"v\":[2]}\r\n{\"v\":3}\n{\"k\":\"d\",\"v\":4}";
        check_every_restore(text, jsonl(Some("/k"), Some("/v"), None), OnError::Skip);
        check_every_restore(
            "id,n\n1,a\n2\n3,c\n\"4,x\",d\n",
            csv(Some(0), Some(1), None, true),
            OnError::Skip,
        );
        check_every_restore("x\ny\n\nz", FileFormat::Lines, OnError::Fail);
    }

    #[test]
    fn a_malformed_position_is_refused() {
        let f = file("x\n");
        let mut source = source(f.path(), FileFormat::Lines, OnError::Fail);
        for position in [&[][..], &[0; 7], &[0; 12], &[0; 17]] {
            let error = source.seek(position).unwrap_err();
            assert!(matches!(error, TaskError::Restore(_)), "{error}");
        }
    }
}
