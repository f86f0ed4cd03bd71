//! A resumable walk over the structure of a value that spans several messages.
//!
//! The typed decoder is recursive, so it cannot pause in the middle of a value. When a value
//! continues in a later message (an interface's type sequence reaches the end of a message),
//! this walk takes over: it keeps what is left to read on an explicit stack, so each new
//! message is walked once, from where the previous one ended. Only when the walk has reached
//! the value's end is the typed decoder run, once, over all the messages. Decoding a spanning
//! value therefore costs a bounded number of passes over its bytes instead of one pass per
//! message over everything received so far (which was quadratic).
//!
//! The walk reads exactly what [`super::ValueDecoder::skip`] reads, with the same checks.

use super::decode::{MAX_DEPTH, MAX_NAME};
use super::types::{ids, next_field, read_wire_type, TypeTable, WireType};
use super::wire::Reader;
use super::GobError;

/// Most entries on the walk's stack: a nesting level pushes at most three (a map's entry
/// counter, its key and its value).
const MAX_STACK: usize = 3 * MAX_DEPTH + 3;

/// What is left to read, innermost last.
#[derive(Debug, Clone, Copy)]
enum Frame {
    /// A value framed as at the top of a message or inside an interface (a singleton behind
    /// a zero field delta).
    Framed(i64),
    /// A bare value of the type.
    Value(i64),
    /// Elements of a slice or array still to read.
    Elems { elem: i64, left: usize },
    /// Entries of a map still to read.
    Entries { key: i64, elem: i64, left: usize },
    /// The rest of a struct; `field` is the number of the last field read.
    Fields { id: i64, field: i64 },
    /// An interface's type sequence, after its name: definitions, then the concrete type id.
    TypeSeq,
}

/// Whether the walk reached the end of the value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Progress {
    /// The value ended.
    Complete,
    /// The value continues in the next message.
    NeedMore,
}

/// A walk in progress over one value.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    stack: Vec<Frame>,
}

impl Scan {
    /// Starts a walk over the value at the start of `r`, defining the types its interfaces
    /// carry.
    pub(crate) fn start(
        r: &mut Reader<'_>,
        types: &mut TypeTable,
    ) -> Result<(Scan, Progress), GobError> {
        let id = r.read_int()?;
        if !types.is_known(id) {
            return Err(GobError::UndefinedType(id));
        }
        let mut scan = Scan {
            stack: vec![Frame::Framed(id)],
        };
        let progress = scan.resume(r, types)?;
        Ok((scan, progress))
    }

    /// Continues the walk over `r`, the next message of the value.
    pub(crate) fn resume(
        &mut self,
        r: &mut Reader<'_>,
        types: &mut TypeTable,
    ) -> Result<Progress, GobError> {
        while let Some(frame) = self.stack.pop() {
            match frame {
                Frame::Framed(id) => {
                    let is_struct = matches!(types.get(id), Some(WireType::Struct { .. }));
                    if !is_struct && r.read_uint()? != 0 {
                        return Err(GobError::Corrupt("non-zero delta for singleton"));
                    }
                    self.push(Frame::Value(id))?;
                }
                Frame::Value(id) => self.value(r, types, id)?,
                Frame::Elems { elem, left } => {
                    if left > 0 {
                        self.push(Frame::Elems {
                            elem,
                            left: left - 1,
                        })?;
                        self.push(Frame::Value(elem))?;
                    }
                }
                Frame::Entries { key, elem, left } => {
                    if left > 0 {
                        self.push(Frame::Entries {
                            key,
                            elem,
                            left: left - 1,
                        })?;
                        self.push(Frame::Value(elem))?;
                        self.push(Frame::Value(key))?;
                    }
                }
                Frame::Fields { id, field } => {
                    // decode.go, decodeStruct: the terminator may be missing at the end.
                    if r.at_message_end() {
                        continue;
                    }
                    let delta = r.read_uint()?;
                    if delta == 0 {
                        continue;
                    }
                    let Some(WireType::Struct { fields, .. }) = types.get(id) else {
                        return Err(GobError::UndefinedType(id));
                    };
                    let field = next_field(field, delta, fields.len())?;
                    let fid = fields
                        .get(usize::try_from(field).unwrap_or(usize::MAX))
                        .map(|f| f.1)
                        .ok_or(GobError::Corrupt("field numbers out of bounds"))?;
                    self.push(Frame::Fields { id, field })?;
                    self.push(Frame::Value(fid))?;
                }
                Frame::TypeSeq => {
                    if r.at_message_end() && !r.next_message() {
                        self.stack.push(Frame::TypeSeq);
                        return Ok(Progress::NeedMore);
                    }
                    let id = r.read_int()?;
                    if id >= 0 {
                        if !types.is_known(id) {
                            return Err(GobError::UndefinedType(id));
                        }
                        // The value's byte count: not needed, the value is parsed.
                        r.read_uint()?;
                        self.push(Frame::Framed(id))?;
                    } else {
                        let wt = read_wire_type(r)?;
                        types.define(id.checked_neg().unwrap_or(0), wt)?;
                        if !r.at_message_end() {
                            r.read_uint()?;
                        }
                        self.push(Frame::TypeSeq)?;
                    }
                }
            }
        }
        Ok(Progress::Complete)
    }

    /// Reads a primitive, or pushes what a composite value holds.
    fn value(&mut self, r: &mut Reader<'_>, types: &TypeTable, id: i64) -> Result<(), GobError> {
        match id {
            ids::BOOL | ids::INT | ids::UINT | ids::FLOAT => {
                r.read_uint()?;
            }
            ids::COMPLEX => {
                r.read_uint()?;
                r.read_uint()?;
            }
            ids::BYTES | ids::STRING => {
                r.read_bytes()?;
            }
            ids::INTERFACE => {
                let name = r.read_bytes()?;
                if name.len() > MAX_NAME {
                    return Err(GobError::Limit("interface name too long"));
                }
                if !name.is_empty() {
                    self.push(Frame::TypeSeq)?;
                }
            }
            _ => match types.get(id) {
                Some(&WireType::Array { elem, len }) => {
                    if r.read_uint()? != len {
                        return Err(GobError::Corrupt("length mismatch in array"));
                    }
                    let left = usize::try_from(len)
                        .ok()
                        .filter(|&n| n <= r.remaining())
                        .ok_or(GobError::Corrupt("length exceeds input size"))?;
                    self.push(Frame::Elems { elem, left })?;
                }
                Some(&WireType::Slice { elem }) => {
                    let left = r.read_len()?;
                    self.push(Frame::Elems { elem, left })?;
                }
                Some(&WireType::Map { key, elem }) => {
                    let left = r.read_len()?;
                    self.push(Frame::Entries { key, elem, left })?;
                }
                Some(WireType::Struct { .. }) => self.push(Frame::Fields { id, field: -1 })?,
                Some(WireType::Marshaler(_)) => {
                    r.read_bytes()?;
                }
                None => return Err(GobError::UndefinedType(id)),
            },
        }
        Ok(())
    }

    fn push(&mut self, frame: Frame) -> Result<(), GobError> {
        if self.stack.len() >= MAX_STACK {
            return Err(GobError::Limit("values nested too deeply"));
        }
        self.stack.push(frame);
        Ok(())
    }
}
