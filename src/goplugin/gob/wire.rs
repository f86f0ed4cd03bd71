//! gob's primitive encodings (encoding/gob/doc.go): unsigned and signed varints, floats,
//! byte strings, and a bounds-checked reader over one or more message bodies.

use super::GobError;

/// Reads primitives from the concatenated bodies of the messages that make up one value.
///
/// Reads never cross a message boundary: only an interface's type sequence may continue in the
/// next message (see [`Reader::next_message`]), exactly as Go's decoder refills its buffer only
/// there.
#[derive(Debug)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// End offsets of the messages in `buf`, ascending; the last one is `buf.len()`.
    ends: &'a [usize],
    /// Index into `ends` of the message being read.
    msg: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, whose messages end at `ends` (ascending, last == `buf.len()`).
    pub(crate) fn new(buf: &'a [u8], ends: &'a [usize]) -> Self {
        Reader {
            buf,
            pos: 0,
            ends,
            msg: 0,
        }
    }

    /// End of the message being read.
    fn limit(&self) -> usize {
        self.ends.get(self.msg).copied().unwrap_or(self.buf.len())
    }

    /// Bytes left in the message being read.
    pub(crate) fn remaining(&self) -> usize {
        self.limit().saturating_sub(self.pos)
    }

    /// Whether the message being read is exhausted.
    pub(crate) fn at_message_end(&self) -> bool {
        self.pos >= self.limit()
    }

    /// Moves on to the next message once the current one is exhausted. `false` when there is no
    /// further message buffered (the value continues in a message not received yet).
    pub(crate) fn next_message(&mut self) -> bool {
        if self.msg + 1 < self.ends.len() {
            self.pos = self.limit();
            self.msg += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn read_byte(&mut self) -> Result<u8, GobError> {
        if self.pos >= self.limit() {
            return Err(GobError::Truncated);
        }
        let b = self.buf.get(self.pos).copied().ok_or(GobError::Truncated)?;
        self.pos += 1;
        Ok(b)
    }

    /// Takes the next `n` bytes of the current message.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], GobError> {
        if n > self.remaining() {
            return Err(GobError::Truncated);
        }
        let s = self
            .buf
            .get(self.pos..self.pos + n)
            .ok_or(GobError::Truncated)?;
        self.pos += n;
        Ok(s)
    }

    /// An unsigned integer: one byte below 128, else a negated byte count and big-endian bytes.
    pub(crate) fn read_uint(&mut self) -> Result<u64, GobError> {
        let b = self.read_byte()?;
        if b < 0x80 {
            return Ok(u64::from(b));
        }
        let n = usize::from(b.wrapping_neg());
        if n > 8 {
            return Err(GobError::Corrupt("invalid uint length"));
        }
        let bytes = self.take(n)?;
        Ok(bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    /// A signed integer: the low bit of the unsigned form says whether to complement.
    pub(crate) fn read_int(&mut self) -> Result<i64, GobError> {
        Ok(uint_to_int(self.read_uint()?))
    }

    /// A float64: its bits, byte-reversed, as an unsigned integer.
    pub(crate) fn read_float(&mut self) -> Result<f64, GobError> {
        Ok(f64::from_bits(self.read_uint()?.swap_bytes()))
    }

    /// A length, checked against what is left of the message (every element takes a byte at
    /// least, so a count larger than that is corrupt, and nothing is allocated for it).
    pub(crate) fn read_len(&mut self) -> Result<usize, GobError> {
        let n = self.read_uint()?;
        match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => Ok(n),
            _ => Err(GobError::Corrupt("length exceeds input size")),
        }
    }

    /// A byte string (`[]byte`, `string`, a GobEncoder's blob).
    pub(crate) fn read_bytes(&mut self) -> Result<&'a [u8], GobError> {
        let n = self.read_len()?;
        self.take(n)
    }

    pub(crate) fn read_string(&mut self) -> Result<String, GobError> {
        let b = self.read_bytes()?;
        String::from_utf8(b.to_vec()).map_err(|_| GobError::Corrupt("invalid UTF-8 in string"))
    }
}

/// Decodes gob's signed integer mapping.
pub(crate) fn uint_to_int(u: u64) -> i64 {
    let i = (u >> 1).cast_signed();
    if u & 1 == 1 {
        !i
    } else {
        i
    }
}

/// Appends an unsigned integer in gob's encoding.
pub(crate) fn put_uint(out: &mut Vec<u8>, v: u64) {
    if let Ok(byte @ 0..0x80) = u8::try_from(v) {
        out.push(byte);
        return;
    }
    let bytes = v.to_be_bytes();
    let skip = (v.leading_zeros() / 8) as usize;
    let n = 8 - skip;
    // 1..=8 bytes follow, announced as the negated count: fits a u8.
    #[allow(clippy::cast_possible_truncation)]
    out.push((n as u8).wrapping_neg());
    out.extend_from_slice(&bytes[skip..]);
}

/// Appends a signed integer in gob's encoding.
pub(crate) fn put_int(out: &mut Vec<u8>, v: i64) {
    let u = if v < 0 {
        ((!v).cast_unsigned() << 1) | 1
    } else {
        v.cast_unsigned() << 1
    };
    put_uint(out, u);
}

/// Appends a byte string.
pub(crate) fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_uint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Parses a message length prefix from the start of `buf`: `Ok(None)` when more bytes are
/// needed, else the prefix width and the length.
pub(crate) fn parse_length_prefix(buf: &[u8]) -> Result<Option<(usize, u64)>, GobError> {
    let Some(&b) = buf.first() else {
        return Ok(None);
    };
    if b < 0x80 {
        return Ok(Some((1, u64::from(b))));
    }
    let n = usize::from(b.wrapping_neg());
    if n > 8 {
        return Err(GobError::Corrupt("invalid message length prefix"));
    }
    let Some(bytes) = buf.get(1..1 + n) else {
        return Ok(None);
    };
    let v = bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
    Ok(Some((1 + n, v)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reader(buf: &[u8]) -> (Vec<u8>, Vec<usize>) {
        (buf.to_vec(), vec![buf.len()])
    }

    #[test]
    fn uints_match_go_examples() {
        // doc.go: 7 is 07; 256 is FE 01 00.
        let mut out = Vec::new();
        put_uint(&mut out, 7);
        assert_eq!(out, [0x07]);
        out.clear();
        put_uint(&mut out, 256);
        assert_eq!(out, [0xFE, 0x01, 0x00]);
        out.clear();
        put_uint(&mut out, u64::MAX);
        assert_eq!(out.len(), 9);
        let (b, e) = reader(&out);
        assert_eq!(Reader::new(&b, &e).read_uint().unwrap(), u64::MAX);
    }

    #[test]
    fn ints_match_go_examples() {
        // doc.go: -129 is ^(128<<1)|1 = 0x101 -> FE 01 01.
        let mut out = Vec::new();
        put_int(&mut out, -129);
        assert_eq!(out, [0xFE, 0x01, 0x01]);
        for v in [0i64, 1, -1, 63, -64, i64::MIN, i64::MAX, 1 << 40] {
            let mut out = Vec::new();
            put_int(&mut out, v);
            let (b, e) = reader(&out);
            assert_eq!(Reader::new(&b, &e).read_int().unwrap(), v);
        }
    }

    #[test]
    fn floats_are_byte_reversed() {
        // doc.go: 17.0 is FE 31 40.
        let (b, e) = reader(&[0xFE, 0x31, 0x40]);
        assert_eq!(Reader::new(&b, &e).read_float().unwrap(), 17.0);
    }

    #[test]
    fn truncated_and_oversized_inputs_are_errors() {
        let (b, e) = reader(&[0xFE, 0x01]);
        assert!(Reader::new(&b, &e).read_uint().is_err());
        let (b, e) = reader(&[0xF0]);
        assert!(Reader::new(&b, &e).read_uint().is_err());
        // A string claiming 2^60 bytes allocates nothing and fails.
        let mut out = Vec::new();
        put_uint(&mut out, 1 << 60);
        out.push(b'x');
        let (b, e) = reader(&out);
        assert!(Reader::new(&b, &e).read_bytes().is_err());
    }

    #[test]
    fn reads_stop_at_message_boundaries() {
        let buf = [0x01, 0x02];
        let ends = [1, 2];
        let mut r = Reader::new(&buf, &ends);
        assert_eq!(r.read_uint().unwrap(), 1);
        assert!(r.at_message_end());
        assert!(r.read_uint().is_err());
        assert!(r.next_message());
        assert_eq!(r.read_uint().unwrap(), 2);
        assert!(!r.next_message());
    }

    #[test]
    fn length_prefix_needs_all_its_bytes() {
        assert_eq!(parse_length_prefix(&[]).unwrap(), None);
        assert_eq!(parse_length_prefix(&[5]).unwrap(), Some((1, 5)));
        assert_eq!(parse_length_prefix(&[0xFE, 0x01]).unwrap(), None);
        assert_eq!(
            parse_length_prefix(&[0xFE, 0x01, 0x00]).unwrap(),
            Some((3, 256))
        );
        assert!(parse_length_prefix(&[0xF0]).is_err());
    }
}
