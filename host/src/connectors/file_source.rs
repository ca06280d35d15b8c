//! The `file` source: one record per line of a text file; its position is the
//! byte offset of the first line not yet emitted. With `follow`, it tails a
//! growing file instead of ending at its end.

use std::fs::File;
use std::io::{BufRead, BufReader, Seek, SeekFrom};
use std::path::PathBuf;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::decode_u64_position;
use crate::dataflow::processor::TaskError;
use crate::dataflow::processor::{Source, SourcePoll};
use crate::dataflow::router::Router;

/// How long a followed file is left alone when it has nothing new.
const FOLLOW_IDLE: Duration = Duration::from_millis(100);

/// Reads lines of a file. Records: empty key, the line (without its line
/// ending) as value, the time it was read (ms since the epoch) as timestamp.
#[derive(Debug)]
pub(crate) struct FileSource {
    path: PathBuf,
    follow: bool,
    reader: Option<BufReader<File>>,
    /// Byte offset of the next line to emit.
    offset: u64,
    line: Vec<u8>,
}

impl FileSource {
    /// A source reading `path` from its start.
    pub(crate) fn new(path: PathBuf, follow: bool) -> Self {
        FileSource {
            path,
            follow,
            reader: None,
            offset: 0,
            line: Vec::new(),
        }
    }

    fn io_error(&self, what: &'static str, e: std::io::Error) -> TaskError {
        TaskError::FileSource {
            path: self.path.clone(),
            what,
            source: e,
        }
    }
}

impl Source for FileSource {
    fn poll(&mut self, out: &mut Router, max: usize) -> Result<SourcePoll, TaskError> {
        if self.reader.is_none() {
            let mut file = match File::open(&self.path) {
                Ok(f) => f,
                Err(e) if self.follow && e.kind() == std::io::ErrorKind::NotFound => {
                    return Ok(SourcePoll::Idle(FOLLOW_IDLE));
                }
                Err(e) => return Err(self.io_error("cannot open", e)),
            };
            file.seek(SeekFrom::Start(self.offset))
                .map_err(|e| self.io_error("cannot seek", e))?;
            self.reader = Some(BufReader::with_capacity(64 * 1024, file));
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        for _ in 0..max {
            self.line.clear();
            let reader = self.reader.as_mut().expect("opened above");
            let n =
                reader
                    .read_until(b'\n', &mut self.line)
                    .map_err(|e| TaskError::FileSource {
                        path: self.path.clone(),
                        what: "cannot read",
                        source: e,
                    })?;
            if n == 0 {
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
            let mut line = self.line.as_slice();
            if let Some(rest) = line.strip_suffix(b"\n") {
                line = rest.strip_suffix(b"\r").unwrap_or(rest);
            }
            out.push(b"", line, now)?;
        }
        Ok(SourcePoll::Emitted)
    }

    fn position(&self) -> Vec<u8> {
        self.offset.to_le_bytes().to_vec()
    }

    fn seek(&mut self, position: &[u8]) -> Result<(), TaskError> {
        self.offset = decode_u64_position("file source", position)?;
        self.reader = None;
        Ok(())
    }
}
