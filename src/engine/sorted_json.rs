//! A measurement value's JSON text written straight from the typed outcome, with every object's
//! keys in byte order: exactly the text `serde_json::to_value` then `to_string` gives (a
//! `Value` object is a sorted map), without building the tree of owned keys and values first.
//!
//! The `compare` kinds encode one outcome per check; over a backtest of 10,000 checks the tree
//! was a fifth of the run's time. Only the shapes the outcomes use are written here (structs,
//! options, numbers, strings, unit enums, sequences); anything else is
//! [`SortedJsonError::Unsupported`] and the caller falls back to the `Value` path, so the text is
//! never different from it.

use serde::ser::{self, Serialize};

/// Why the value could not be written by this writer.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SortedJsonError {
    /// A shape this writer does not mirror (maps, 128-bit integers, f32, bytes, tuple or
    /// struct variants): use `serde_json::to_value`.
    #[error("{0} is not written by the sorted JSON writer")]
    Unsupported(&'static str),
    /// A `Serialize` implementation reported an error.
    #[error("{0}")]
    Custom(String),
}

impl ser::Error for SortedJsonError {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        SortedJsonError::Custom(msg.to_string())
    }
}

/// `value` as compact JSON with sorted object keys, as `serde_json::to_value(value)` prints.
pub(crate) fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, SortedJsonError> {
    let mut w = Writer {
        out: Vec::with_capacity(1024),
        fields: Vec::with_capacity(32),
        scratch: Vec::new(),
    };
    value.serialize(&mut w)?;
    // Every byte written is serde_json's own output or ASCII punctuation, so it is UTF-8.
    String::from_utf8(w.out).map_err(|e| SortedJsonError::Custom(e.to_string()))
}

/// The output so far; objects are re-ordered in place when they end.
struct Writer {
    out: Vec<u8>,
    /// The fields of the objects being written, innermost last (a stack, so nested objects
    /// allocate nothing): each key and the byte range of its value in `out`.
    fields: Vec<(&'static str, std::ops::Range<usize>)>,
    /// An object's field values while it is rewritten in key order (reused).
    scratch: Vec<u8>,
}

impl Writer {
    /// A scalar or string exactly as serde_json writes it (numbers by itoa / ryu, non-finite
    /// floats as `null`, strings escaped).
    fn scalar<T: Serialize + ?Sized>(&mut self, v: &T) -> Result<(), SortedJsonError> {
        serde_json::to_writer(&mut self.out, v).map_err(|e| SortedJsonError::Custom(e.to_string()))
    }
}

/// An object key: field names are plain identifiers, written as they are; anything that would
/// need escaping goes through serde_json.
fn write_key(out: &mut Vec<u8>, key: &str) -> Done {
    if key.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(key.as_bytes());
        out.push(b'"');
        Ok(())
    } else {
        serde_json::to_writer(out, key).map_err(|e| SortedJsonError::Custom(e.to_string()))
    }
}

type Done = Result<(), SortedJsonError>;

/// The `Serializer` methods of scalars serde_json writes the same way as its `Value` prints them.
macro_rules! scalars {
    ($($method:ident: $t:ty,)*) => {
        $(fn $method(self, v: $t) -> Done {
            self.scalar(&v)
        })*
    };
}

/// The three sequence traits, all written as an array.
macro_rules! array_impl {
    ($($trait_:ident :: $method:ident),*) => {
        $(impl ser::$trait_ for Array<'_> {
            type Ok = ();
            type Error = SortedJsonError;
            fn $method<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
                self.element(value)
            }
            fn end(self) -> Done {
                self.close()
            }
        })*
    };
}

impl<'a> ser::Serializer for &'a mut Writer {
    type Ok = ();
    type Error = SortedJsonError;
    type SerializeSeq = Array<'a>;
    type SerializeTuple = Array<'a>;
    type SerializeTupleStruct = Array<'a>;
    type SerializeTupleVariant = ser::Impossible<(), SortedJsonError>;
    type SerializeMap = ser::Impossible<(), SortedJsonError>;
    type SerializeStruct = Object<'a>;
    type SerializeStructVariant = ser::Impossible<(), SortedJsonError>;

    scalars! {
        serialize_bool: bool,
        serialize_i8: i8,
        serialize_i16: i16,
        serialize_i32: i32,
        serialize_i64: i64,
        serialize_u8: u8,
        serialize_u16: u16,
        serialize_u32: u32,
        serialize_u64: u64,
        serialize_f64: f64,
        serialize_char: char,
    }
    fn serialize_i128(self, _: i128) -> Done {
        Err(SortedJsonError::Unsupported("i128"))
    }
    fn serialize_u128(self, _: u128) -> Done {
        Err(SortedJsonError::Unsupported("u128"))
    }
    // A `Value` keeps an f32 widened to f64 and prints all its digits; a direct write prints
    // the f32's shortest form. Not mirrored.
    fn serialize_f32(self, _: f32) -> Done {
        Err(SortedJsonError::Unsupported("f32"))
    }
    fn serialize_str(self, v: &str) -> Done {
        self.scalar(v)
    }
    fn serialize_bytes(self, _: &[u8]) -> Done {
        Err(SortedJsonError::Unsupported("bytes"))
    }
    fn serialize_none(self) -> Done {
        self.out.extend_from_slice(b"null");
        Ok(())
    }
    fn serialize_some<T: Serialize + ?Sized>(self, value: &T) -> Done {
        value.serialize(self)
    }
    fn serialize_unit(self) -> Done {
        self.serialize_none()
    }
    fn serialize_unit_struct(self, _: &'static str) -> Done {
        self.serialize_none()
    }
    fn serialize_unit_variant(self, _: &'static str, _: u32, variant: &'static str) -> Done {
        self.scalar(variant)
    }
    fn serialize_newtype_struct<T: Serialize + ?Sized>(self, _: &'static str, value: &T) -> Done {
        value.serialize(self)
    }
    fn serialize_newtype_variant<T: Serialize + ?Sized>(
        self,
        _: &'static str,
        _: u32,
        variant: &'static str,
        value: &T,
    ) -> Done {
        self.out.push(b'{');
        self.scalar(variant)?;
        self.out.push(b':');
        value.serialize(&mut *self)?;
        self.out.push(b'}');
        Ok(())
    }
    fn serialize_seq(self, _: Option<usize>) -> Result<Array<'a>, SortedJsonError> {
        self.out.push(b'[');
        Ok(Array {
            w: self,
            first: true,
        })
    }
    fn serialize_tuple(self, len: usize) -> Result<Array<'a>, SortedJsonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_struct(
        self,
        _: &'static str,
        len: usize,
    ) -> Result<Array<'a>, SortedJsonError> {
        self.serialize_seq(Some(len))
    }
    fn serialize_tuple_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeTupleVariant, SortedJsonError> {
        Err(SortedJsonError::Unsupported("tuple variant"))
    }
    fn serialize_map(self, _: Option<usize>) -> Result<Self::SerializeMap, SortedJsonError> {
        Err(SortedJsonError::Unsupported("map"))
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Object<'a>, SortedJsonError> {
        let start = self.out.len();
        let base = self.fields.len();
        Ok(Object {
            w: self,
            start,
            base,
        })
    }
    fn serialize_struct_variant(
        self,
        _: &'static str,
        _: u32,
        _: &'static str,
        _: usize,
    ) -> Result<Self::SerializeStructVariant, SortedJsonError> {
        Err(SortedJsonError::Unsupported("struct variant"))
    }
}

/// An array being written: elements in order, comma-separated.
struct Array<'a> {
    w: &'a mut Writer,
    first: bool,
}

impl Array<'_> {
    fn element<T: Serialize + ?Sized>(&mut self, value: &T) -> Done {
        if !self.first {
            self.w.out.push(b',');
        }
        self.first = false;
        value.serialize(&mut *self.w)
    }

    fn close(self) -> Done {
        self.w.out.push(b']');
        Ok(())
    }
}

array_impl!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

/// An object being written: each field's value is written at the end of the output as it
/// comes, and the whole object is rewritten with its keys sorted when it ends (nested objects
/// are already sorted by then, so one pass per object suffices).
struct Object<'a> {
    w: &'a mut Writer,
    /// Where the object's first field value begins in the output.
    start: usize,
    /// Where the object's fields begin on the writer's field stack.
    base: usize,
}

impl ser::SerializeStruct for Object<'_> {
    type Ok = ();
    type Error = SortedJsonError;

    fn serialize_field<T: Serialize + ?Sized>(&mut self, key: &'static str, value: &T) -> Done {
        let from = self.w.out.len();
        value.serialize(&mut *self.w)?;
        let to = self.w.out.len();
        self.w.fields.push((key, from..to));
        Ok(())
    }

    fn end(self) -> Done {
        let w = self.w;
        w.scratch.clear();
        w.scratch
            .extend_from_slice(w.out.get(self.start..).unwrap_or_default());
        w.out.truncate(self.start);
        let fields = w.fields.get_mut(self.base..).unwrap_or_default();
        // Byte order of the keys, as a `Value` object (a `BTreeMap<String, _>`) iterates. The
        // first bytes mostly differ: compared inline before the full keys.
        fields.sort_unstable_by(|a, b| {
            let (a, b) = (a.0.as_bytes(), b.0.as_bytes());
            a.first().cmp(&b.first()).then_with(|| a.cmp(b))
        });
        w.out.push(b'{');
        for (i, (key, range)) in fields.iter().enumerate() {
            if i > 0 {
                w.out.push(b',');
            }
            write_key(&mut w.out, key)?;
            w.out.push(b':');
            let local = range.start - self.start..range.end - self.start;
            if let Some(bytes) = w.scratch.get(local) {
                w.out.extend_from_slice(bytes);
            }
        }
        w.fields.truncate(self.base);
        w.out.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Serialize;

    /// What the writer must equal: the `Value` tree's text.
    fn via_value<T: Serialize>(v: &T) -> String {
        serde_json::to_string(&serde_json::to_value(v).unwrap()).unwrap()
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    enum Kind {
        Worse,
        NotWorse,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Inner {
        zeta: u64,
        alpha: Option<f64>,
        kind: Kind,
    }

    #[derive(Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Outer {
        verdict: Kind,
        canary: Inner,
        p_value: Option<f64>,
        list: Vec<Inner>,
        label: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        skipped: Option<u32>,
        flag: bool,
        pair: (i64, f64),
        wrapped: Option<Inner>,
    }

    fn outer(x: f64) -> Outer {
        Outer {
            verdict: Kind::NotWorse,
            canary: Inner {
                zeta: 15_000,
                alpha: Some(x),
                kind: Kind::Worse,
            },
            p_value: None,
            list: vec![
                Inner {
                    zeta: 0,
                    alpha: None,
                    kind: Kind::NotWorse,
                },
                Inner {
                    zeta: u64::MAX,
                    alpha: Some(-0.0),
                    kind: Kind::Worse,
                },
            ],
            label: "a \"quoted\" \\ label\n\u{1}é",
            skipped: None,
            flag: true,
            pair: (-3, 1e21),
            wrapped: Some(Inner {
                zeta: 7,
                alpha: Some(f64::INFINITY),
                kind: Kind::Worse,
            }),
        }
    }

    #[test]
    fn writes_the_text_the_value_tree_prints() {
        for x in [
            0.1,
            1.0 / 3.0,
            5e-324,
            f64::MAX,
            f64::NAN,
            f64::NEG_INFINITY,
            123_456.0,
            -2.5e-8,
        ] {
            let v = outer(x);
            assert_eq!(to_string(&v).unwrap(), via_value(&v), "x = {x}");
        }
    }

    #[test]
    fn shapes_it_does_not_mirror_are_refused_not_written_differently() {
        let map: std::collections::HashMap<&str, u8> = [("b", 1), ("a", 2)].into();
        assert!(matches!(
            to_string(&map),
            Err(SortedJsonError::Unsupported("map"))
        ));
        assert!(matches!(
            to_string(&0.1f32),
            Err(SortedJsonError::Unsupported("f32"))
        ));
        assert!(matches!(
            to_string(&1u128),
            Err(SortedJsonError::Unsupported("u128"))
        ));
    }

    /// The outcomes every `compare` form encodes, over verdicts, looks and empty sides.
    #[test]
    fn every_compare_outcome_is_written_as_through_the_value_tree() {
        use crate::stats::{
            compare_distributions, compare_histograms, compare_ratio, Buckets, Design, Direction,
            DistOptions, HistogramOptions, Look, RatioInput, RatioOptions,
        };
        let looks = [
            Look::single(),
            Look::of(3, 10),
            Look::open_ended(7).with_design(Design::Cumulative),
        ];
        for look in looks {
            for (cb, ct, sb, st) in [
                (75, 15_000, 75, 15_000),
                (400, 15_000, 70, 15_000),
                (0, 0, 3, 100),
            ] {
                let input = RatioInput {
                    canary_bad: cb,
                    canary_total: ct,
                    stable_bad: sb,
                    stable_total: st,
                };
                for margin in [0.0, 0.01] {
                    let opts = RatioOptions {
                        look,
                        ..RatioOptions::new(0.2, margin, 0.95)
                    };
                    let o = compare_ratio(&input, &opts).unwrap();
                    assert_eq!(to_string(&o).unwrap(), via_value(&o));
                }
            }
            let canary: Vec<f64> = (0..60).map(|i| 100.0 + f64::from(i % 7) * 3.0).collect();
            let stable: Vec<f64> = (0..60).map(|i| 90.0 + f64::from(i % 5) * 2.0).collect();
            for correct in [false, true] {
                let opts = DistOptions {
                    direction: Direction::Increase,
                    max_increase: 0.05,
                    confidence: 0.95,
                    min_samples: 10,
                    look,
                    correct_autocorrelation: correct,
                };
                let o = compare_distributions(&canary, &stable, &opts).unwrap();
                assert_eq!(to_string(&o).unwrap(), via_value(&o));
            }
            let bounds = vec![0.1, 0.5, 1.0];
            let c = Buckets::from_counts(bounds.clone(), vec![500, 300, 150, 50]).unwrap();
            let s = Buckets::from_counts(bounds, vec![700, 200, 80, 20]).unwrap();
            for threshold in [None, Some(0.5)] {
                let opts = HistogramOptions {
                    max_increase: 0.1,
                    margin: 0.0,
                    confidence: 0.95,
                    min_requests: 100,
                    threshold,
                    look,
                };
                let o = compare_histograms(&c, &s, &opts).unwrap();
                assert_eq!(to_string(&o).unwrap(), via_value(&o));
            }
        }
    }
}
