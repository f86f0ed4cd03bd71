//! Type definitions sent by the remote encoder (encoding/gob/type.go, `wireType`), and the
//! per-stream table that holds them.

use std::collections::HashMap;

use super::wire::Reader;
use super::GobError;

/// Ids of gob's predefined types.
pub(crate) mod ids {
    pub(crate) const BOOL: i64 = 1;
    pub(crate) const INT: i64 = 2;
    pub(crate) const UINT: i64 = 3;
    pub(crate) const FLOAT: i64 = 4;
    pub(crate) const BYTES: i64 = 5;
    pub(crate) const STRING: i64 = 6;
    pub(crate) const COMPLEX: i64 = 7;
    pub(crate) const INTERFACE: i64 = 8;
    /// The lowest id a user type may be defined under (type.go, `firstUserId`).
    pub(crate) const FIRST_USER: i64 = 64;
}

/// Most types one stream may define; a full AnalysisRun with a Job provider needs a few hundred.
const MAX_TYPES: usize = 20_000;
/// Most bytes of names and fields one stream's type definitions may hold.
const MAX_TABLE_BYTES: usize = 32 << 20;
/// Ids below this are looked up in a dense vector; Go allocates ids from 65 upwards.
const DENSE_IDS: i64 = 1 << 16;

/// How a type with a marshalling method travels: always as a byte string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MarshalKind {
    Gob,
    Binary,
    Text,
}

/// One remote type definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum WireType {
    Array {
        elem: i64,
        len: u64,
    },
    Slice {
        elem: i64,
    },
    Struct {
        name: String,
        fields: Vec<(String, i64)>,
    },
    Map {
        key: i64,
        elem: i64,
    },
    Marshaler(MarshalKind),
}

impl WireType {
    fn cost(&self) -> usize {
        match self {
            WireType::Struct { name, fields } => {
                name.len() + 32 + fields.iter().map(|(n, _)| n.len() + 32).sum::<usize>()
            }
            _ => 32,
        }
    }
}

/// The types one stream's remote encoder has defined, by id.
#[derive(Debug, Default)]
pub(crate) struct TypeTable {
    types: Vec<WireType>,
    /// For ids below [`DENSE_IDS`]: index into `types` plus one, 0 when undefined.
    dense: Vec<u32>,
    sparse: HashMap<i64, u32>,
    bytes: usize,
}

impl TypeTable {
    /// The definition of `id`, if the stream has defined it.
    pub(crate) fn get(&self, id: i64) -> Option<&WireType> {
        let idx = if (0..DENSE_IDS).contains(&id) {
            let slot = *self.dense.get(usize::try_from(id).ok()?)?;
            slot.checked_sub(1)?
        } else {
            *self.sparse.get(&id)?
        };
        self.types.get(idx as usize)
    }

    /// Whether `id` is a predefined type or one this stream defined.
    pub(crate) fn is_known(&self, id: i64) -> bool {
        (ids::BOOL..=ids::INTERFACE).contains(&id) || self.get(id).is_some()
    }

    /// Records a definition. Defining an id twice is an error unless the definitions are
    /// identical: a value that continues in a later message is decoded again from its start,
    /// meeting the definitions it carries a second time.
    pub(crate) fn define(&mut self, id: i64, wt: WireType) -> Result<(), GobError> {
        if id < ids::FIRST_USER {
            return Err(GobError::Corrupt("type id below the user range"));
        }
        if let Some(existing) = self.get(id) {
            return if *existing == wt {
                Ok(())
            } else {
                Err(GobError::Corrupt("duplicate type received"))
            };
        }
        if self.types.len() >= MAX_TYPES {
            return Err(GobError::Limit("too many type definitions"));
        }
        self.bytes += wt.cost();
        if self.bytes > MAX_TABLE_BYTES {
            return Err(GobError::Limit("type definitions too large"));
        }
        // Below MAX_TYPES (checked above), so the index fits the dense table's u32 slots.
        #[allow(clippy::cast_possible_truncation)]
        let idx = self.types.len() as u32;
        self.types.push(wt);
        if let Some(i) = usize::try_from(id).ok().filter(|_| id < DENSE_IDS) {
            if self.dense.len() <= i {
                self.dense.resize(i + 1, 0);
            }
            if let Some(slot) = self.dense.get_mut(i) {
                *slot = idx + 1;
            }
        } else {
            self.sparse.insert(id, idx);
        }
        Ok(())
    }
}

/// Reads a `wireType` value (the definition following a negative id).
pub(crate) fn read_wire_type(r: &mut Reader<'_>) -> Result<WireType, GobError> {
    let mut found: Option<WireType> = None;
    let mut field = -1i64;
    loop {
        let delta = r.read_uint()?;
        if delta == 0 {
            break;
        }
        field = next_field(field, delta, 7)?;
        let wt = match field {
            0 => {
                let (mut elem, mut len) = (0, 0u64);
                read_fields(r, 3, |r, f| {
                    match f {
                        0 => drop(read_common(r)?),
                        1 => elem = r.read_int()?,
                        _ => {
                            len = u64::try_from(r.read_int()?)
                                .map_err(|_| GobError::Corrupt("negative array length"))?
                        }
                    }
                    Ok(())
                })?;
                WireType::Array { elem, len }
            }
            1 => {
                let mut elem = 0;
                read_fields(r, 2, |r, f| {
                    match f {
                        0 => drop(read_common(r)?),
                        _ => elem = r.read_int()?,
                    }
                    Ok(())
                })?;
                WireType::Slice { elem }
            }
            2 => {
                let mut name = String::new();
                let mut fields = Vec::new();
                read_fields(r, 2, |r, f| {
                    match f {
                        0 => name = read_common(r)?,
                        _ => fields = read_field_list(r)?,
                    }
                    Ok(())
                })?;
                WireType::Struct { name, fields }
            }
            3 => {
                let (mut key, mut elem) = (0, 0);
                read_fields(r, 3, |r, f| {
                    match f {
                        0 => drop(read_common(r)?),
                        1 => key = r.read_int()?,
                        _ => elem = r.read_int()?,
                    }
                    Ok(())
                })?;
                WireType::Map { key, elem }
            }
            4..=6 => {
                read_fields(r, 1, |r, _| read_common(r).map(drop))?;
                WireType::Marshaler(match field {
                    4 => MarshalKind::Gob,
                    5 => MarshalKind::Binary,
                    _ => MarshalKind::Text,
                })
            }
            _ => return Err(GobError::Corrupt("invalid wireType field")),
        };
        if found.replace(wt).is_some() {
            return Err(GobError::Corrupt("type definition with two kinds"));
        }
    }
    found.ok_or(GobError::Corrupt("empty type definition"))
}

/// Walks a struct value with `count` fields, handing each present field's index to `f`.
fn read_fields(
    r: &mut Reader<'_>,
    count: usize,
    mut f: impl FnMut(&mut Reader<'_>, i64) -> Result<(), GobError>,
) -> Result<(), GobError> {
    let mut field = -1i64;
    loop {
        let delta = r.read_uint()?;
        if delta == 0 {
            return Ok(());
        }
        field = next_field(field, delta, count)?;
        f(r, field)?;
    }
}

/// `CommonType{Name string; Id typeId}`: returns the name.
fn read_common(r: &mut Reader<'_>) -> Result<String, GobError> {
    let mut name = String::new();
    read_fields(r, 2, |r, f| {
        match f {
            0 => {
                let b = r.read_bytes()?;
                if b.len() > 4096 {
                    return Err(GobError::Limit("type name too long"));
                }
                name = String::from_utf8_lossy(b).into_owned();
            }
            _ => {
                r.read_int()?;
            }
        }
        Ok(())
    })?;
    Ok(name)
}

/// `[]fieldType{Name string; Id typeId}`.
fn read_field_list(r: &mut Reader<'_>) -> Result<Vec<(String, i64)>, GobError> {
    let n = r.read_len()?;
    let mut out = Vec::with_capacity(n.min(256));
    for _ in 0..n {
        let (mut name, mut id) = (String::new(), 0);
        read_fields(r, 2, |r, f| {
            match f {
                0 => {
                    let b = r.read_bytes()?;
                    if b.len() > 4096 {
                        return Err(GobError::Limit("field name too long"));
                    }
                    name = String::from_utf8_lossy(b).into_owned();
                }
                _ => id = r.read_int()?,
            }
            Ok(())
        })?;
        out.push((name, id));
    }
    Ok(out)
}

/// The next field number after `field` moved on by `delta`, checked against `count` fields.
pub(crate) fn next_field(field: i64, delta: u64, count: usize) -> Result<i64, GobError> {
    let delta = i64::try_from(delta).map_err(|_| GobError::Corrupt("field number overflow"))?;
    match field.checked_add(delta) {
        Some(next) if usize::try_from(next).is_ok_and(|n| n < count) => Ok(next),
        _ => Err(GobError::Corrupt("field numbers out of bounds")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redefinition_must_be_identical() {
        let mut t = TypeTable::default();
        let wt = WireType::Slice { elem: ids::STRING };
        t.define(65, wt.clone()).unwrap();
        t.define(65, wt).unwrap();
        assert!(t.define(65, WireType::Slice { elem: ids::INT }).is_err());
        assert!(t.define(3, WireType::Slice { elem: ids::INT }).is_err());
        t.define(1 << 40, WireType::Map { key: 6, elem: 6 })
            .unwrap();
        assert!(t.get(1 << 40).is_some());
        assert!(t.is_known(ids::STRING));
        assert!(!t.is_known(66));
    }

    #[test]
    fn struct_definition_from_go_bytes() {
        // A Go encoder's definition of `type T struct{ A string; B int }` under id 65, the
        // message body after its -65 prefix: wireType{StructT: {CommonType{"T", 65},
        // Field: [{"A", 6}, {"B", 2}]}}.
        let body = [
            0x03, 0x01, 0x01, 0x01, b'T', 0x01, 0xFF, 0x82, 0x00, 0x01, 0x02, 0x01, 0x01, b'A',
            0x01, 0x0C, 0x00, 0x01, 0x01, b'B', 0x01, 0x04, 0x00, 0x00, 0x00,
        ];
        let ends = [body.len()];
        let wt = read_wire_type(&mut Reader::new(&body, &ends)).unwrap();
        assert_eq!(
            wt,
            WireType::Struct {
                name: "T".into(),
                fields: vec![("A".into(), ids::STRING), ("B".into(), ids::INT)],
            }
        );
    }
}
