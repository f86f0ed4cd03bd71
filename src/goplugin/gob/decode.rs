//! Decoding gob values straight into typed Rust values (encoding/gob/decoder.go, decode.go).
//!
//! Each remote struct type is matched to a local one by field name once per stream (a
//! [`Plan`]); fields the local type does not name are skipped by walking their remote type
//! definitions, so a whole AnalysisRun costs one pass over its bytes and no allocation beyond
//! the fields kept.

use std::any::TypeId;
use std::collections::{BTreeMap, HashMap};

use super::scan::{Progress, Scan};
use super::types::{ids, next_field, read_wire_type, TypeTable, WireType};
use super::wire::Reader;
use super::GobError;

/// Deepest nesting of values followed before giving up (guards the stack).
pub(crate) const MAX_DEPTH: usize = 256;
/// Most bytes one value may span across messages.
const MAX_PENDING: usize = 64 << 20;
/// Longest registered interface name accepted.
pub(crate) const MAX_NAME: usize = 1024;

/// A type that can be decoded from a gob value of some remote type.
pub trait GobDecode: Sized {
    /// Decodes a value whose remote type is `id`. Struct values and singletons arrive without
    /// their framing (the caller has read the type id and, for singletons, the zero delta).
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError>;
}

/// A concrete type that travels inside an interface under a registered name
/// (`gob.RegisterName`).
pub trait Registered: GobDecode {
    /// The name the Go side registered the type under.
    const NAME: &'static str;
}

/// What one message did to the stream's decoder.
#[derive(Debug)]
pub enum Step<T> {
    /// The message defined a type; the value is still to come.
    TypeDefined,
    /// The value continues in a later message (an interface introduced new types).
    NeedMore,
    /// A complete value.
    Value(T),
}

/// The field mapping of one remote struct type onto one local struct type.
#[derive(Debug)]
struct Plan {
    /// Per remote field: the local field index (or [`SKIP`]) and the remote type id.
    fields: Vec<(u16, i64)>,
}

const SKIP: u16 = u16::MAX;

/// Decode plans of one stream, compiled on first use.
#[derive(Debug, Default)]
pub(crate) struct Plans {
    index: HashMap<(TypeId, i64), usize>,
    plans: Vec<Plan>,
}

/// The decoding half of one gob stream: the remote type definitions, compiled plans, and a
/// value that spans several messages while it is incomplete.
///
/// A spanning value is walked message by message by a resumable [`Scan`] and decoded into
/// its type once the walk has reached its end, so its cost is linear in its size.
#[derive(Debug, Default)]
pub struct Decoder {
    types: TypeTable,
    plans: Plans,
    /// The messages of the incomplete value, concatenated.
    pending: Vec<u8>,
    /// End offsets of those messages in `pending`.
    ends: Vec<usize>,
    /// Where the walk over the incomplete value stands.
    scan: Scan,
    /// Bytes handed to decoding passes so far (tests check this stays linear).
    #[cfg(test)]
    pub(crate) walked: usize,
}

impl Decoder {
    /// A decoder for a new stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds one message body (without its length prefix), decoding the value it completes
    /// into a `T`. A decode error drops the value; the stream stays usable.
    pub fn feed<T: GobDecode>(&mut self, body: &[u8]) -> Result<Step<T>, GobError> {
        let single = [body.len()];
        let mut r = Reader::new(body, &single);
        let first = r.read_int()?;
        if first < 0 {
            // decoder.go, decodeTypeSequence: a message holding one definition.
            let wt = read_wire_type(&mut r)?;
            if !r.at_message_end() {
                return Err(GobError::Corrupt("extra data in buffer"));
            }
            self.types.define(first.checked_neg().unwrap_or(0), wt)?;
            return Ok(Step::TypeDefined);
        }
        if self.pending.is_empty() {
            return match self.decode_from::<T>(body, &single) {
                Err(GobError::NeedMore) => self.start_spanning(body),
                other => other.map(Step::Value),
            };
        }
        let result = self.continue_spanning::<T>(body);
        if !matches!(result, Ok(Step::NeedMore)) {
            self.drop_pending();
        }
        result
    }

    /// A value that did not end with its first message: walks that message and keeps it.
    fn start_spanning<T>(&mut self, body: &[u8]) -> Result<Step<T>, GobError> {
        self.note_walked(body.len());
        let single = [body.len()];
        let (scan, progress) = Scan::start(&mut Reader::new(body, &single), &mut self.types)?;
        if progress == Progress::Complete {
            return Err(GobError::Corrupt(
                "value ends where its decoding wanted more",
            ));
        }
        self.scan = scan;
        self.pending.extend_from_slice(body);
        self.ends.push(self.pending.len());
        Ok(Step::NeedMore)
    }

    /// The next message of a spanning value: walked from where the last one ended; once the
    /// value is complete, it is decoded from its first message.
    fn continue_spanning<T: GobDecode>(&mut self, body: &[u8]) -> Result<Step<T>, GobError> {
        if self.pending.len() + body.len() > MAX_PENDING {
            return Err(GobError::Limit("value spans too many bytes"));
        }
        self.note_walked(body.len());
        let single = [body.len()];
        let progress = self
            .scan
            .resume(&mut Reader::new(body, &single), &mut self.types)?;
        self.pending.extend_from_slice(body);
        self.ends.push(self.pending.len());
        if progress == Progress::NeedMore {
            return Ok(Step::NeedMore);
        }
        let pending = std::mem::take(&mut self.pending);
        let ends = std::mem::take(&mut self.ends);
        match self.decode_from::<T>(&pending, &ends) {
            Err(GobError::NeedMore) => Err(GobError::Corrupt(
                "value continues past the end its structure gives",
            )),
            other => other.map(Step::Value),
        }
    }

    /// Forgets an incomplete value.
    fn drop_pending(&mut self) {
        self.pending.clear();
        self.ends.clear();
        self.scan = Scan::default();
    }

    #[cfg(test)]
    fn note_walked(&mut self, n: usize) {
        self.walked += n;
    }

    #[cfg(not(test))]
    fn note_walked(&mut self, _: usize) {}

    /// Decodes the value at the start of `buf` (message bodies ending at `ends`).
    fn decode_from<T: GobDecode>(&mut self, buf: &[u8], ends: &[usize]) -> Result<T, GobError> {
        self.note_walked(buf.len());
        let mut d = ValueDecoder {
            r: Reader::new(buf, ends),
            types: &mut self.types,
            plans: &mut self.plans,
            depth: 0,
        };
        let id = d.r.read_int()?;
        d.top_level(id)
    }
}

/// Reads one value's bytes; handed to [`GobDecode::decode`].
#[derive(Debug)]
pub struct ValueDecoder<'a> {
    r: Reader<'a>,
    types: &'a mut TypeTable,
    plans: &'a mut Plans,
    depth: usize,
}

impl ValueDecoder<'_> {
    /// A value framed as at the top of a message or inside an interface: structs bare,
    /// anything else behind a zero field delta.
    fn top_level<T: GobDecode>(&mut self, id: i64) -> Result<T, GobError> {
        if !self.types.is_known(id) {
            return Err(GobError::UndefinedType(id));
        }
        if !self.is_struct(id) && self.r.read_uint()? != 0 {
            return Err(GobError::Corrupt("non-zero delta for singleton"));
        }
        T::decode(self, id)
    }

    /// How remote type `id` marshals itself, if it does.
    pub(crate) fn marshal_kind(&self, id: i64) -> Option<super::types::MarshalKind> {
        match self.types.get(id) {
            Some(WireType::Marshaler(kind)) => Some(*kind),
            _ => None,
        }
    }

    fn is_struct(&self, id: i64) -> bool {
        matches!(self.types.get(id), Some(WireType::Struct { .. }))
    }

    fn enter(&mut self) -> Result<(), GobError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(GobError::Limit("values nested too deeply"));
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    /// Checks that the remote type is exactly the predefined `want`.
    pub fn expect(&self, id: i64, want: i64, local: &'static str) -> Result<(), GobError> {
        if id == want {
            Ok(())
        } else {
            Err(GobError::Mismatch { local, remote: id })
        }
    }

    /// An unsigned integer.
    pub fn read_uint(&mut self) -> Result<u64, GobError> {
        self.r.read_uint()
    }

    /// A signed integer.
    pub fn read_int(&mut self) -> Result<i64, GobError> {
        self.r.read_int()
    }

    /// A byte string, borrowed from the message.
    pub fn read_bytes(&mut self) -> Result<&[u8], GobError> {
        self.r.read_bytes()
    }

    /// A UTF-8 string.
    pub fn read_string(&mut self) -> Result<String, GobError> {
        self.r.read_string()
    }

    /// Decodes a struct value of remote type `id` into local type `S` whose Go field names are
    /// `fields`: `f` receives each present field's local index and remote type id; fields
    /// `S` does not have are skipped.
    pub fn decode_struct<S: 'static>(
        &mut self,
        id: i64,
        fields: &'static [&'static str],
        local: &'static str,
        mut f: impl FnMut(&mut Self, usize, i64) -> Result<(), GobError>,
    ) -> Result<(), GobError> {
        let plan = self.plan(TypeId::of::<S>(), id, fields, local)?;
        self.enter()?;
        let mut field = -1i64;
        // decode.go, decodeStruct: the terminator may be missing at the end of the buffer.
        while !self.r.at_message_end() {
            let delta = self.r.read_uint()?;
            if delta == 0 {
                break;
            }
            let count = self.plans.plans.get(plan).map_or(0, |p| p.fields.len());
            field = next_field(field, delta, count)?;
            let (idx, fid) = self
                .plans
                .plans
                .get(plan)
                .and_then(|p| p.fields.get(usize::try_from(field).ok()?))
                .copied()
                .ok_or(GobError::Corrupt("field numbers out of bounds"))?;
            if idx == SKIP {
                self.skip(fid)?;
            } else {
                f(self, usize::from(idx), fid)?;
            }
        }
        self.leave();
        Ok(())
    }

    /// The plan for local type `key` from remote struct `id`, compiled on first use.
    fn plan(
        &mut self,
        key: TypeId,
        id: i64,
        fields: &'static [&'static str],
        local: &'static str,
    ) -> Result<usize, GobError> {
        if let Some(&p) = self.plans.index.get(&(key, id)) {
            return Ok(p);
        }
        let Some(WireType::Struct { fields: remote, .. }) = self.types.get(id) else {
            return Err(GobError::Mismatch { local, remote: id });
        };
        let plan = Plan {
            fields: remote
                .iter()
                .map(|(name, fid)| {
                    let idx = fields.iter().position(|f| f == name);
                    (
                        idx.and_then(|i| u16::try_from(i).ok()).unwrap_or(SKIP),
                        *fid,
                    )
                })
                .collect(),
        };
        let p = self.plans.plans.len();
        self.plans.plans.push(plan);
        self.plans.index.insert((key, id), p);
        Ok(p)
    }

    /// Skips a value of remote type `id` (decode.go, `ignore*`), parsing rather than trusting
    /// byte counts.
    pub fn skip(&mut self, id: i64) -> Result<(), GobError> {
        match id {
            ids::BOOL | ids::INT | ids::UINT | ids::FLOAT => {
                self.r.read_uint()?;
            }
            ids::COMPLEX => {
                self.r.read_uint()?;
                self.r.read_uint()?;
            }
            ids::BYTES | ids::STRING => {
                self.r.read_bytes()?;
            }
            ids::INTERFACE => self.skip_interface()?,
            _ => {
                self.enter()?;
                self.skip_composite(id)?;
                self.leave();
            }
        }
        Ok(())
    }

    fn skip_composite(&mut self, id: i64) -> Result<(), GobError> {
        enum Kind {
            Array(i64, u64),
            Slice(i64),
            Map(i64, i64),
            Struct(usize),
            Bytes,
        }
        let kind = match self.types.get(id) {
            Some(WireType::Array { elem, len }) => Kind::Array(*elem, *len),
            Some(WireType::Slice { elem }) => Kind::Slice(*elem),
            Some(WireType::Map { key, elem }) => Kind::Map(*key, *elem),
            Some(WireType::Struct { fields, .. }) => Kind::Struct(fields.len()),
            Some(WireType::Marshaler(_)) => Kind::Bytes,
            None => return Err(GobError::UndefinedType(id)),
        };
        match kind {
            Kind::Array(elem, len) => {
                if self.r.read_uint()? != len {
                    return Err(GobError::Corrupt("length mismatch in array"));
                }
                if len > self.r.remaining() as u64 {
                    return Err(GobError::Corrupt("length exceeds input size"));
                }
                for _ in 0..len {
                    self.skip(elem)?;
                }
            }
            Kind::Slice(elem) => {
                for _ in 0..self.r.read_len()? {
                    self.skip(elem)?;
                }
            }
            Kind::Map(key, elem) => {
                for _ in 0..self.r.read_len()? {
                    self.skip(key)?;
                    self.skip(elem)?;
                }
            }
            Kind::Struct(count) => {
                let mut field = -1i64;
                while !self.r.at_message_end() {
                    let delta = self.r.read_uint()?;
                    if delta == 0 {
                        break;
                    }
                    field = next_field(field, delta, count)?;
                    let fid = match self.types.get(id) {
                        Some(WireType::Struct { fields, .. }) => {
                            usize::try_from(field).ok().and_then(|f| fields.get(f))
                        }
                        _ => None,
                    }
                    .map(|f| f.1)
                    .ok_or(GobError::Corrupt("field numbers out of bounds"))?;
                    self.skip(fid)?;
                }
            }
            Kind::Bytes => {
                self.r.read_bytes()?;
            }
        }
        Ok(())
    }

    /// Reads an interface's name, its type sequence and the value's byte count. `None` for a
    /// nil interface; else the name and the concrete type id.
    ///
    /// decoder.go, `decodeTypeSequence(isInterface = true)`: definitions may precede the id,
    /// each followed either by a message boundary (Go's encoder flushed the value so far) or by
    /// the byte count of a delimited chunk, which is skipped.
    fn interface_header(&mut self) -> Result<Option<(Vec<u8>, i64)>, GobError> {
        let name = self.r.read_bytes()?;
        if name.is_empty() {
            return Ok(None);
        }
        if name.len() > MAX_NAME {
            return Err(GobError::Limit("interface name too long"));
        }
        let name = name.to_vec();
        loop {
            if self.r.at_message_end() && !self.r.next_message() {
                return Err(GobError::NeedMore);
            }
            let id = self.r.read_int()?;
            if id >= 0 {
                if !self.types.is_known(id) {
                    return Err(GobError::UndefinedType(id));
                }
                // The byte count of the value: not needed, since values are parsed.
                self.r.read_uint()?;
                return Ok(Some((name, id)));
            }
            let wt = read_wire_type(&mut self.r)?;
            self.types.define(id.checked_neg().unwrap_or(0), wt)?;
            if !self.r.at_message_end() {
                self.r.read_uint()?;
            }
        }
    }

    fn skip_interface(&mut self) -> Result<(), GobError> {
        self.enter()?;
        if let Some((_, id)) = self.interface_header()? {
            self.skip_framed(id)?;
        }
        self.leave();
        Ok(())
    }

    /// Skips a value framed as inside an interface.
    fn skip_framed(&mut self, id: i64) -> Result<(), GobError> {
        if !self.is_struct(id) && self.r.read_uint()? != 0 {
            return Err(GobError::Corrupt("non-zero delta for singleton"));
        }
        self.skip(id)
    }

    /// Decodes an interface value holding `T` (registered as `T::NAME`); `None` when nil.
    /// Another registered name is an error, after the value has been read past.
    pub fn decode_interface<T: Registered>(&mut self, id: i64) -> Result<Option<T>, GobError> {
        self.expect(id, ids::INTERFACE, "interface")?;
        self.enter()?;
        let out = match self.interface_header()? {
            None => None,
            Some((name, concrete)) if name == T::NAME.as_bytes() => {
                Some(self.top_level::<T>(concrete)?)
            }
            Some((name, concrete)) => {
                self.skip_framed(concrete)?;
                return Err(GobError::UnexpectedInterface {
                    want: T::NAME,
                    got: String::from_utf8_lossy(&name).into_owned(),
                });
            }
        };
        self.leave();
        Ok(out)
    }

    /// Decodes a map, handing each entry to `insert`.
    fn decode_map<K: GobDecode, V: GobDecode>(
        &mut self,
        id: i64,
        local: &'static str,
        mut insert: impl FnMut(K, V),
    ) -> Result<(), GobError> {
        let Some(&WireType::Map { key, elem }) = self.types.get(id) else {
            return Err(GobError::Mismatch { local, remote: id });
        };
        self.enter()?;
        for _ in 0..self.r.read_len()? {
            let k = K::decode(self, key)?;
            let v = V::decode(self, elem)?;
            insert(k, v);
        }
        self.leave();
        Ok(())
    }
}

/// A Go slice `[]T` of any element type but `byte` (which is [`Vec<u8>`]).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Seq<T>(pub Vec<T>);

impl<T> Default for Seq<T> {
    fn default() -> Self {
        Seq(Vec::new())
    }
}

impl<T: GobDecode> GobDecode for Seq<T> {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        let Some(&WireType::Slice { elem }) = d.types.get(id) else {
            return Err(GobError::Mismatch {
                local: "slice",
                remote: id,
            });
        };
        d.enter()?;
        // read_len bounds the count by the bytes left, so a forged length cannot reserve memory.
        let n = d.r.read_len()?;
        let mut out = Vec::with_capacity(n.min(1024));
        for _ in 0..n {
            out.push(T::decode(d, elem)?);
        }
        d.leave();
        Ok(Seq(out))
    }
}

/// A Go interface value expected to hold `T` (or nil: `None`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Interface<T>(pub Option<T>);

impl<T: Registered> GobDecode for Interface<T> {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.decode_interface::<T>(id).map(Interface)
    }
}

/// Any value, skipped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Ignored;

impl GobDecode for Ignored {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.skip(id)?;
        Ok(Ignored)
    }
}

impl GobDecode for String {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::STRING, "string")?;
        d.read_string()
    }
}

impl GobDecode for bool {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::BOOL, "bool")?;
        match d.read_uint()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(GobError::Corrupt("invalid bool")),
        }
    }
}

impl GobDecode for i64 {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::INT, "int")?;
        d.read_int()
    }
}

impl GobDecode for i32 {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::INT, "int32")?;
        i32::try_from(d.read_int()?).map_err(|_| GobError::Corrupt("value out of range"))
    }
}

impl GobDecode for f64 {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::FLOAT, "float64")?;
        d.r.read_float()
    }
}

impl GobDecode for u64 {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::UINT, "uint")?;
        d.read_uint()
    }
}

impl GobDecode for Vec<u8> {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        d.expect(id, ids::BYTES, "[]byte")?;
        Ok(d.read_bytes()?.to_vec())
    }
}

/// `*T`: gob flattens pointers, so a present value is the pointee.
impl<T: GobDecode> GobDecode for Option<T> {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        T::decode(d, id).map(Some)
    }
}

impl<K: GobDecode + Ord, V: GobDecode> GobDecode for BTreeMap<K, V> {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        let mut out = BTreeMap::new();
        d.decode_map(id, "map", |k, v| {
            out.insert(k, v);
        })?;
        Ok(out)
    }
}

/// Declares a plain struct decoded from a Go struct by field name: each field is written
/// `rust_name: Type = "GoName"`. Fields the Go side sends that are not listed are skipped.
macro_rules! gob_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $( $(#[$fmeta:meta])* $fvis:vis $field:ident : $ty:ty = $go:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default, Clone, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* $fvis $field: $ty ),*
        }

        impl $crate::goplugin::gob::GobDecode for $name {
            fn decode(
                d: &mut $crate::goplugin::gob::ValueDecoder<'_>,
                id: i64,
            ) -> Result<Self, $crate::goplugin::gob::GobError> {
                const FIELDS: &[&str] = &[$($go),*];
                let mut out = Self::default();
                d.decode_struct::<Self>(id, FIELDS, stringify!($name), |d, index, fid| {
                    let mut i = 0usize;
                    $(
                        if index == i {
                            out.$field = <$ty as $crate::goplugin::gob::GobDecode>::decode(d, fid)?;
                            return Ok(());
                        }
                        i += 1;
                    )*
                    let _ = i;
                    Ok(())
                })?;
                Ok(out)
            }
        }
    };
}
pub(crate) use gob_struct;

#[cfg(test)]
mod tests {
    use super::super::encode::test_support::*;
    use super::*;

    gob_struct! {
        struct Inner {
            a: String = "A",
        }
    }

    gob_struct! {
        struct Outer {
            inner: Option<Inner> = "Inner",
            n: i64 = "N",
            m: BTreeMap<String, String> = "M",
        }
    }

    impl Registered for Outer {
        const NAME: &'static str = "Outer";
    }

    /// Definitions for Outer{Inner *Inner; Skip []Inner; N int; M map[string]string} with
    /// Inner{A string; B float64}.
    fn outer_defs(m: &mut MsgBuilder) {
        m.def_struct(
            65,
            "Outer",
            &[("Inner", 66), ("Skip", 67), ("N", 2), ("M", 68)],
        );
        m.def_struct(66, "Inner", &[("A", 6), ("B", 4)]);
        m.def_slice(67, 66);
        m.def_map(68, 6, 6);
    }

    fn outer_value(v: &mut Vec<u8>) {
        // Inner{A: "x", B: 1.5}
        v.extend([1, 1, 1, b'x', 1, 0xFE, 0xF8, 0x3F, 0]);
        // Skip: two Inner elements
        v.extend([1, 2, 1, 1, b'q', 0, 2, 0xFE, 0xF0, 0x3F, 0]);
        // N: -3
        v.extend([1, 5]);
        // M: {"k": "v"}
        v.extend([1, 1, 1, b'k', 1, b'v']);
        v.push(0);
    }

    #[test]
    fn struct_fields_are_matched_by_name_and_extras_skipped() {
        let mut m = MsgBuilder::default();
        outer_defs(&mut m);
        let mut v = vec![0xFF, 0x82]; // id 65
        outer_value(&mut v);
        m.msg(&v);
        let got: Outer = decode_all(&m.msgs).unwrap();
        assert_eq!(got.inner.unwrap().a, "x");
        assert_eq!(got.n, -3);
        assert_eq!(got.m.get("k").map(String::as_str), Some("v"));
    }

    gob_struct! {
        struct OuterSeq {
            skip: Seq<Inner> = "Skip",
            n: i64 = "N",
        }
    }

    #[test]
    fn slices_of_structs_decode_in_order() {
        let mut m = MsgBuilder::default();
        outer_defs(&mut m);
        let mut v = vec![0xFF, 0x82];
        outer_value(&mut v);
        m.msg(&v);
        let got: OuterSeq = decode_all(&m.msgs).unwrap();
        let names: Vec<&str> = got.skip.0.iter().map(|i| i.a.as_str()).collect();
        assert_eq!(names, ["q", ""]);
        assert_eq!(got.n, -3);
        // A slice local type against a remote string is a mismatch, not a panic.
        let mut m = MsgBuilder::default();
        m.def_struct(65, "Outer", &[("Skip", 6)]);
        m.msg(&[0xFF, 0x82, 1, 1, b'z', 0]);
        assert!(decode_all::<OuterSeq>(&m.msgs).is_err());
    }

    #[test]
    fn interface_spanning_messages_decodes() {
        // Go's layout when the concrete type is new on the stream: the first message carries
        // the interface header and the first definition; the other definitions follow as
        // messages of their own; the last message carries the id, a byte count and the value.
        let mut m = MsgBuilder::default();
        let mut first = vec![0x10, 0x00, 5, b'O', b'u', b't', b'e', b'r'];
        first.extend(struct_def_body(
            65,
            "Outer",
            &[("Inner", 66), ("Skip", 67), ("N", 2), ("M", 68)],
        ));
        m.msg(&first);
        m.def_struct(66, "Inner", &[("A", 6), ("B", 4)]);
        m.def_slice(67, 66);
        m.def_map(68, 6, 6);
        let mut last = vec![0xFF, 0x82, 0x20];
        outer_value(&mut last);
        m.msg(&last);
        let mut dec = Decoder::new();
        let mut steps = Vec::new();
        let mut value = None;
        for msg in &m.msgs {
            match dec.feed::<IfaceOuter>(msg).unwrap() {
                Step::Value(v) => value = Some(v),
                Step::NeedMore => steps.push("more"),
                Step::TypeDefined => steps.push("type"),
            }
        }
        assert_eq!(steps, ["more", "type", "type", "type"]);
        let got = value.unwrap().0.unwrap();
        assert_eq!(got.n, -3);
        // Same stream, second value: everything known, one message.
        let mut again = vec![
            0x10, 0x00, 5, b'O', b'u', b't', b'e', b'r', 0xFF, 0x82, 0x20,
        ];
        outer_value(&mut again);
        let Step::Value(v) = dec.feed::<IfaceOuter>(&again).unwrap() else {
            panic!("expected a value");
        };
        assert_eq!(v.0.unwrap().inner.unwrap().a, "x");
    }

    #[test]
    fn wrong_interface_name_is_an_error_but_types_are_kept() {
        let mut first = vec![0x10, 0x00, 3, b'F', b'o', b'o'];
        first.extend(struct_def_body(65, "Foo", &[("A", 6)]));
        // Inline definitions are followed by a delimited chunk's byte count.
        first.extend([0x07, 0xFF, 0x82, 0x04, 1, 1, b'z', 0]);
        let mut dec = Decoder::new();
        let err = dec.feed::<IfaceOuter>(&first).unwrap_err();
        assert!(matches!(err, GobError::UnexpectedInterface { .. }), "{err}");
        // Type 65 stays defined for the stream.
        let Step::Value(Ignored) = dec.feed::<Ignored>(&[0xFF, 0x82, 1, 1, b'y', 0]).unwrap()
        else {
            panic!("expected a value");
        };
    }

    type IfaceOuter = Interface<Outer>;

    #[test]
    fn nil_interface_and_singletons() {
        let Step::Value(v) = Decoder::new()
            .feed::<IfaceOuter>(&[0x10, 0x00, 0x00])
            .unwrap()
        else {
            panic!()
        };
        assert!(v.0.is_none());
        let Step::Value(s) = Decoder::new()
            .feed::<String>(&[0x0C, 0x00, 2, b'h', b'i'])
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(s, "hi");
        // A non-zero singleton delta is corrupt.
        assert!(Decoder::new()
            .feed::<String>(&[0x0C, 0x01, 2, b'h', b'i'])
            .is_err());
    }

    #[test]
    fn type_mismatch_and_undefined_types_are_errors() {
        assert!(matches!(
            Decoder::new().feed::<String>(&[0x04, 0x00, 2]),
            Err(GobError::Mismatch { .. })
        ));
        assert!(matches!(
            Decoder::new().feed::<Ignored>(&[0xFF, 0x90, 0x00]),
            Err(GobError::UndefinedType(72))
        ));
    }

    #[test]
    fn deep_nesting_is_refused_not_overflowed() {
        // type L []L, nested far deeper than MAX_DEPTH.
        let mut m = MsgBuilder::default();
        m.def_slice(65, 65);
        let mut v = vec![0xFF, 0x82, 0x00];
        v.extend(std::iter::repeat_n(1, 10_000));
        v.push(0);
        m.msg(&v);
        let err = decode_all::<Ignored>(&m.msgs).unwrap_err();
        assert!(matches!(err, GobError::Limit(_)), "{err}");
    }

    #[test]
    fn huge_counts_allocate_nothing() {
        let mut m = MsgBuilder::default();
        m.def_slice(65, 6);
        m.def_map(66, 6, 6);
        m.msg(&[0xFF, 0x82, 0x00, 0xF8, 0x10, 0, 0, 0, 0, 0, 0, 0]);
        assert!(decode_all::<Ignored>(&m.msgs).is_err());
        let mut m2 = MsgBuilder::default();
        m2.def_map(66, 6, 6);
        m2.msg(&[0xFF, 0x84, 0x00, 0xFC, 0x7F, 0xFF, 0xFF, 0xFF]);
        assert!(decode_all::<BTreeMap<String, String>>(&m2.msgs).is_err());
    }

    gob_struct! {
        struct PaddedArgs {
            pad: Ignored = "Pad",
        }
    }

    impl Registered for PaddedArgs {
        const NAME: &'static str = "RunArgs";
    }

    /// Feeds `msgs` and returns the values completed and the decoder.
    fn feed_run_request(msgs: &[Vec<u8>]) -> (usize, Option<Interface<PaddedArgs>>, Decoder) {
        let mut dec = Decoder::new();
        let mut header = 0;
        let mut args = None;
        for m in msgs {
            if header == 0 {
                if let Step::Value(Ignored) = dec.feed::<Ignored>(m).unwrap() {
                    header += 1;
                }
            } else if let Step::Value(v) = dec.feed::<Interface<PaddedArgs>>(m).unwrap() {
                args = Some(v);
            }
        }
        (header, args, dec)
    }

    #[test]
    fn a_value_spanning_thousands_of_messages_is_walked_a_bounded_number_of_times() {
        // The layout that once made decoding quadratic: a Plugin.Run whose []interface{} elements each end a
        // message. Re-decoding everything received on every message walked ~n^2/2 bytes.
        for spanning in [false, true] {
            let msgs = super::super::testkit::plugin_run_request(7, 256 << 10, spanning);
            let total: usize = msgs.iter().map(Vec::len).sum();
            if spanning {
                assert!(msgs.len() > 10_000, "{} messages", msgs.len());
            }
            let (headers, args, dec) = feed_run_request(&msgs);
            assert_eq!(headers, 1);
            assert!(args.and_then(|a| a.0).is_some(), "spanning {spanning}");
            assert!(
                dec.walked <= 3 * total,
                "spanning {spanning}: walked {} bytes for {total}",
                dec.walked
            );
            assert!(dec.pending.is_empty() && dec.ends.is_empty());
        }
    }

    #[test]
    fn the_stream_goes_on_after_a_spanning_value_and_after_a_broken_one() {
        let msgs = super::super::testkit::plugin_run_request(1, 4 << 10, true);
        let (_, _, mut dec) = feed_run_request(&msgs);
        // The same value again, now that every type is known: still spanning, still decoded.
        let again: Vec<_> = msgs[4..].to_vec();
        let mut got = None;
        for m in &again {
            if let Step::Value(v) = dec.feed::<Interface<PaddedArgs>>(m).unwrap() {
                got = Some(v);
            }
        }
        assert!(got.and_then(|a| a.0).is_some());
        // A continuation that is not a type id and value: an error, and the value is dropped.
        assert!(matches!(
            dec.feed::<Interface<PaddedArgs>>(&again[0]).unwrap(),
            Step::NeedMore
        ));
        let err = dec
            .feed::<Interface<PaddedArgs>>(&[0x7E, 0x00])
            .unwrap_err();
        assert!(matches!(err, GobError::UndefinedType(_)), "{err}");
        assert!(dec.pending.is_empty());
        let Step::Value(s) = dec.feed::<String>(&[0x0C, 0x00, 2, b'o', b'k']).unwrap() else {
            panic!("expected a value");
        };
        assert_eq!(s, "ok");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1024))]

        /// Arbitrary messages give values or errors, never a panic.
        #[test]
        fn random_messages_never_panic(
            msgs in proptest::collection::vec(proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), 1..8)
        ) {
            let mut a = Decoder::new();
            let mut b = Decoder::new();
            let mut c = Decoder::new();
            for m in &msgs {
                let _ = a.feed::<Ignored>(m);
                let _ = b.feed::<IfaceOuter>(m);
                let _ = c.feed::<Outer>(m);
            }
        }
    }
}
