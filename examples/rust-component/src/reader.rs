//! Reading little-endian fields off the front of a byte string, for the two formats the
//! operator decodes: batches ([`crate::batch`]) and its own snapshots ([`crate::count`]).

use std::fmt::Display;

/// A cursor over bytes whose every read fails, with a message naming the field, when too few
/// bytes are left.
pub(crate) struct Reader<'a> {
    /// What is left to read.
    rest: &'a [u8],
    /// What the bytes are, for messages: "batch", "state".
    subject: &'static str,
}

impl<'a> Reader<'a> {
    /// Starts reading `bytes`, which hold a `subject`.
    pub(crate) fn new(bytes: &'a [u8], subject: &'static str) -> Self {
        Reader {
            rest: bytes,
            subject,
        }
    }

    /// The message for a malformed subject: `malformed <subject>: <problem>`.
    pub(crate) fn error(&self, problem: impl Display) -> String {
        format!("malformed {}: {problem}", self.subject)
    }

    /// Takes the next `len` bytes, the field named `field`.
    pub(crate) fn bytes(&mut self, len: usize, field: &str) -> Result<&'a [u8], String> {
        if self.rest.len() < len {
            return Err(self.error(format_args!(
                "truncated {field} ({len} bytes needed, {} left)",
                self.rest.len()
            )));
        }
        let (head, tail) = self.rest.split_at(len);
        self.rest = tail;
        Ok(head)
    }

    /// Takes the next `N` bytes.
    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], String> {
        let bytes = self.bytes(N, field)?;
        Ok(bytes.try_into().expect("`bytes` returned exactly N bytes"))
    }

    /// Takes a `u32`.
    pub(crate) fn u32(&mut self, field: &str) -> Result<u32, String> {
        self.array(field).map(u32::from_le_bytes)
    }

    /// Takes a `u64`.
    pub(crate) fn u64(&mut self, field: &str) -> Result<u64, String> {
        self.array(field).map(u64::from_le_bytes)
    }

    /// Takes an `i64`.
    pub(crate) fn i64(&mut self, field: &str) -> Result<i64, String> {
        self.array(field).map(i64::from_le_bytes)
    }

    /// Checks a `count` read from the field `field`, of items of at least `min_item_len` bytes
    /// each that follow: refuses one the bytes left cannot hold, before it sizes an
    /// allocation.
    pub(crate) fn check_count(
        &self,
        count: u32,
        field: &str,
        min_item_len: usize,
    ) -> Result<usize, String> {
        usize::try_from(count)
            .ok()
            .filter(|&count| count <= self.rest.len() / min_item_len)
            .ok_or_else(|| {
                self.error(format_args!(
                    "{field} {count} but only {} bytes follow",
                    self.rest.len()
                ))
            })
    }

    /// Takes a `u32` length, of the bytes that follow.
    pub(crate) fn len(&mut self, field: &str) -> Result<usize, String> {
        let len = self.u32(field)?;
        usize::try_from(len).map_err(|_| self.error(format_args!("{field} {len} does not fit")))
    }

    /// Succeeds if nothing is left, after the whole subject was read.
    pub(crate) fn finish(self) -> Result<(), String> {
        match self.rest.len() {
            0 => Ok(()),
            left => Err(self.error(format_args!("{left} bytes left over at its end"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_fields_in_order() {
        let bytes = [
            1, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 255, 255, 255, 255, 255, 255, 255, 255,
        ];
        let mut reader = Reader::new(&bytes, "test");
        assert_eq!(reader.u32("a"), Ok(1));
        assert_eq!(reader.u64("b"), Ok(2));
        assert_eq!(reader.i64("c"), Ok(-1));
        assert_eq!(reader.finish(), Ok(()));
    }

    #[test]
    fn names_the_field_that_is_truncated() {
        let mut reader = Reader::new(&[1, 2, 3], "test");
        assert_eq!(
            reader.u32("width"),
            Err("malformed test: truncated width (4 bytes needed, 3 left)".to_owned())
        );
    }

    #[test]
    fn refuses_a_count_the_bytes_cannot_hold() {
        let reader = Reader::new(&[0; 5], "test");
        assert_eq!(reader.check_count(2, "items", 2), Ok(2));
        assert_eq!(
            reader.check_count(2, "items", 3),
            Err("malformed test: items 2 but only 5 bytes follow".to_owned())
        );
        assert!(reader.check_count(u32::MAX, "items", 1).is_err());
    }

    #[test]
    fn refuses_bytes_left_over() {
        let mut reader = Reader::new(&[0, 0], "test");
        assert_eq!(reader.bytes(1, "a"), Ok(&[0][..]));
        assert_eq!(
            reader.finish(),
            Err("malformed test: 1 bytes left over at its end".to_owned())
        );
    }
}
