//! Little-endian reads that never panic: one cursor shared by every decoder of a binary
//! format in Weir — the ABI's batch and init messages here, and on the host the task state
//! envelope, its sections and the Kafka sink's state — so that none writes its own.

/// A cursor over a byte slice whose reads fail with the offset at which the
/// input ran short, instead of panicking.
#[derive(Clone)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// The input ended before a field at `offset` that needed `needed` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Short {
    /// Where the field that did not fit begins.
    pub offset: usize,
    /// How many bytes it needed.
    pub needed: usize,
}

impl<'a> Reader<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, pos: 0 }
    }

    /// How many bytes are left to read.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Where the next read begins.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// The next `len` bytes.
    pub fn take(&mut self, len: usize) -> Result<&'a [u8], Short> {
        let end = self
            .pos
            .checked_add(len)
            .filter(|&end| end <= self.bytes.len());
        match end {
            Some(end) => {
                let out = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(out)
            }
            None => Err(Short {
                offset: self.pos,
                needed: len,
            }),
        }
    }

    /// The next byte.
    pub fn u8(&mut self) -> Result<u8, Short> {
        Ok(self.take(1)?[0])
    }

    /// The next two bytes, little-endian.
    pub fn u16(&mut self) -> Result<u16, Short> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    /// The next four bytes, little-endian.
    pub fn u32(&mut self) -> Result<u32, Short> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// The next eight bytes, little-endian.
    pub fn u64(&mut self) -> Result<u64, Short> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// The next eight bytes, little-endian and signed.
    pub fn i64(&mut self) -> Result<i64, Short> {
        Ok(i64::from_le_bytes(self.array()?))
    }

    /// The bytes that follow a `u32` length: a length-prefixed field.
    pub fn prefixed(&mut self) -> Result<&'a [u8], Short> {
        let len = self.u32()? as usize;
        self.take(len)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], Short> {
        Ok(self.take(N)?.try_into().expect("take returns N bytes"))
    }
}

/// Appends `bytes` after their length as a `u32`: what [`Reader::prefixed`] reads.
///
/// # Panics
/// If `bytes` are 4 GiB or more, which no field of Weir's formats may be.
pub fn put_prefixed(out: &mut Vec<u8>, bytes: &[u8]) {
    put_len(out, bytes.len());
    out.extend_from_slice(bytes);
}

/// Appends a count or length as a `u32`.
///
/// # Panics
/// If `len` does not fit in a `u32`, which no count in Weir's formats may exceed.
pub fn put_len(out: &mut Vec<u8>, len: usize) {
    let len = u32::try_from(len).expect("a length in Weir's formats fits in a u32");
    out.extend_from_slice(&len.to_le_bytes());
}
