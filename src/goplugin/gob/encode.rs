//! Encoding the values rollgate sends (encoding/gob/encoder.go, encode.go): net/rpc response
//! headers and the replies of the control and plugin services.
//!
//! The set of reply types is fixed, so each has a fixed type id on every stream; a stream's
//! encoder sends a type's definition before its first use, as Go's does.

use std::collections::BTreeMap;

use super::time::{encode_go_time, go_zero_time};
use super::types::ids;
use super::wire::{put_bytes, put_int, put_uint};
use crate::measurement::Measurement;

/// Type ids of the types rollgate defines on its streams (any id from 65 up is valid).
mod local {
    pub(crate) const RESPONSE: i64 = 65;
    pub(crate) const EMPTY: i64 = 66;
    pub(crate) const MEASUREMENT: i64 = 67;
    pub(crate) const TIME: i64 = 68;
    pub(crate) const STRING_MAP: i64 = 69;
    pub(crate) const RPC_ERROR: i64 = 70;
}

/// A net/rpc reply body.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Body<'a> {
    /// `struct{}` (Control.Ping/Quit, and the body after an error).
    Empty,
    /// `uint32` (Dispenser.Dispense).
    Uint(u64),
    /// `string` (Plugin.Type).
    Str(&'a str),
    /// `map[string]string` (Plugin.GetMetadata).
    StrMap(&'a BTreeMap<String, String>),
    /// `v1alpha1.Measurement`.
    Measurement(&'a Measurement),
    /// `types.RpcError{ErrorString}`; empty means no error.
    RpcError(&'a str),
}

/// The encoding half of one gob stream.
#[derive(Debug, Default)]
pub(crate) struct Encoder {
    /// Bit `id - 65` is set once type `id` has been defined on the stream.
    sent: u32,
}

impl Encoder {
    /// An encoder for a new stream.
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Appends a net/rpc response (server.go, `sendResponse`): the header, then `body`, or an
    /// empty struct when `error` is set.
    pub(crate) fn encode_response(
        &mut self,
        out: &mut Vec<u8>,
        service_method: &str,
        seq: u64,
        error: &str,
        body: &Body<'_>,
    ) {
        self.define(out, local::RESPONSE);
        message(out, |b| {
            put_int(b, local::RESPONSE);
            let mut f = Fields::default();
            if !service_method.is_empty() {
                f.next(b, 0);
                put_bytes(b, service_method.as_bytes());
            }
            if seq != 0 {
                f.next(b, 1);
                put_uint(b, seq);
            }
            if !error.is_empty() {
                f.next(b, 2);
                put_bytes(b, error.as_bytes());
            }
            b.push(0);
        });
        let body = if error.is_empty() { *body } else { Body::Empty };
        self.encode_body(out, &body);
    }

    fn encode_body(&mut self, out: &mut Vec<u8>, body: &Body<'_>) {
        match body {
            Body::Empty => {
                self.define(out, local::EMPTY);
                message(out, |b| {
                    put_int(b, local::EMPTY);
                    b.push(0);
                });
            }
            Body::Uint(v) => message(out, |b| {
                put_int(b, ids::UINT);
                b.push(0);
                put_uint(b, *v);
            }),
            Body::Str(s) => message(out, |b| {
                put_int(b, ids::STRING);
                b.push(0);
                put_bytes(b, s.as_bytes());
            }),
            Body::StrMap(m) => {
                self.define(out, local::STRING_MAP);
                message(out, |b| {
                    put_int(b, local::STRING_MAP);
                    b.push(0);
                    put_string_map(b, m);
                });
            }
            Body::RpcError(e) => {
                self.define(out, local::RPC_ERROR);
                message(out, |b| {
                    put_int(b, local::RPC_ERROR);
                    if !e.is_empty() {
                        put_uint(b, 1);
                        put_bytes(b, e.as_bytes());
                    }
                    b.push(0);
                });
            }
            Body::Measurement(m) => {
                self.define(out, local::MEASUREMENT);
                message(out, |b| put_measurement(b, m));
            }
        }
    }

    /// Sends the definition of `id` (and of the types it uses) unless already sent.
    fn define(&mut self, out: &mut Vec<u8>, id: i64) {
        let bit = 1u32 << (id - 65);
        if self.sent & bit != 0 {
            return;
        }
        self.sent |= bit;
        match id {
            local::RESPONSE => message(out, |b| {
                put_struct_def(
                    b,
                    id,
                    "Response",
                    &[
                        ("ServiceMethod", ids::STRING),
                        ("Seq", ids::UINT),
                        ("Error", ids::STRING),
                    ],
                )
            }),
            local::EMPTY => message(out, |b| put_struct_def(b, id, "struct {}", &[])),
            local::RPC_ERROR => message(out, |b| {
                put_struct_def(b, id, "RpcError", &[("ErrorString", ids::STRING)])
            }),
            local::TIME => message(out, |b| put_gob_encoder_def(b, id, "Time")),
            local::STRING_MAP => message(out, |b| {
                put_map_def(b, id, "map[string]string", ids::STRING, ids::STRING)
            }),
            local::MEASUREMENT => {
                message(out, |b| {
                    put_struct_def(
                        b,
                        id,
                        "Measurement",
                        &[
                            ("Phase", ids::STRING),
                            ("Message", ids::STRING),
                            ("StartedAt", local::TIME),
                            ("FinishedAt", local::TIME),
                            ("Value", ids::STRING),
                            ("Metadata", local::STRING_MAP),
                            ("ResumeAt", local::TIME),
                        ],
                    )
                });
                self.define(out, local::TIME);
                self.define(out, local::STRING_MAP);
            }
            _ => {}
        }
    }
}

/// Tracks field numbers for delta encoding within one struct value.
#[derive(Default)]
struct Fields {
    last: i64,
}

impl Fields {
    fn next(&mut self, out: &mut Vec<u8>, index: i64) {
        // Starts at -1: the first field's delta is its index plus one.
        put_uint(out, (index + 1 - self.last).cast_unsigned());
        self.last = index + 1;
    }
}

fn put_measurement(b: &mut Vec<u8>, m: &Measurement) {
    put_int(b, local::MEASUREMENT);
    let mut f = Fields::default();
    f.next(b, 0);
    put_bytes(b, m.phase.as_str().as_bytes());
    if !m.message.is_empty() {
        f.next(b, 1);
        put_bytes(b, m.message.as_bytes());
    }
    // Go omits a zero time (what a nil StartedAt decodes to).
    if m.started_at != go_zero_time() {
        f.next(b, 2);
        put_bytes(b, &encode_go_time(&m.started_at));
    }
    if let Some(t) = &m.finished_at {
        f.next(b, 3);
        put_bytes(b, &encode_go_time(t));
    }
    if !m.value.is_empty() {
        f.next(b, 4);
        put_bytes(b, m.value.as_bytes());
    }
    if !m.metadata.is_empty() {
        f.next(b, 5);
        put_string_map(b, &m.metadata);
    }
    if let Some(t) = &m.resume_at {
        f.next(b, 6);
        put_bytes(b, &encode_go_time(t));
    }
    b.push(0);
}

fn put_string_map(b: &mut Vec<u8>, m: &BTreeMap<String, String>) {
    put_uint(b, m.len() as u64);
    for (k, v) in m {
        put_bytes(b, k.as_bytes());
        put_bytes(b, v.as_bytes());
    }
}

/// Appends one message: a length prefix, then what `f` writes.
pub(crate) fn message(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    const ROOM: usize = 9;
    let start = out.len();
    out.extend_from_slice(&[0; ROOM]);
    f(out);
    let len = out.len() - start - ROOM;
    let mut prefix = Vec::with_capacity(ROOM);
    put_uint(&mut prefix, len as u64);
    let gap = ROOM - prefix.len();
    if let Some(dst) = out.get_mut(start + gap..start + ROOM) {
        dst.copy_from_slice(&prefix);
    }
    out.drain(start..start + gap);
}

/// `CommonType{Name, Id}` as a struct value.
fn put_common(b: &mut Vec<u8>, name: &str, id: i64) {
    put_uint(b, 1);
    put_bytes(b, name.as_bytes());
    put_uint(b, 1);
    put_int(b, id);
    b.push(0);
}

/// A definition message body for a struct type: `-id`, then `wireType{StructT: ...}`.
pub(crate) fn put_struct_def(b: &mut Vec<u8>, id: i64, name: &str, fields: &[(&str, i64)]) {
    put_int(b, -id);
    put_uint(b, 3);
    put_uint(b, 1);
    put_common(b, name, id);
    if !fields.is_empty() {
        put_uint(b, 1);
        put_uint(b, fields.len() as u64);
        for (n, fid) in fields {
            put_uint(b, 1);
            put_bytes(b, n.as_bytes());
            put_uint(b, 1);
            put_int(b, *fid);
            b.push(0);
        }
    }
    b.push(0);
    b.push(0);
}

/// A definition message body for a slice type.
pub(crate) fn put_slice_def(b: &mut Vec<u8>, id: i64, name: &str, elem: i64) {
    put_int(b, -id);
    put_uint(b, 2);
    put_uint(b, 1);
    put_common(b, name, id);
    put_uint(b, 1);
    put_int(b, elem);
    b.push(0);
    b.push(0);
}

/// A definition message body for a map type.
pub(crate) fn put_map_def(b: &mut Vec<u8>, id: i64, name: &str, key: i64, elem: i64) {
    put_int(b, -id);
    put_uint(b, 4);
    put_uint(b, 1);
    put_common(b, name, id);
    put_uint(b, 1);
    put_int(b, key);
    put_uint(b, 1);
    put_int(b, elem);
    b.push(0);
    b.push(0);
}

/// A definition message body for a GobEncoder type.
pub(crate) fn put_gob_encoder_def(b: &mut Vec<u8>, id: i64, name: &str) {
    put_int(b, -id);
    put_uint(b, 5);
    put_uint(b, 1);
    put_common(b, name, id);
    b.push(0);
    b.push(0);
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Builders for handcrafted gob streams.

    use super::super::decode::{Decoder, GobDecode, Step};
    use super::super::GobError;
    use super::*;

    /// Message bodies (without length prefixes) of a stream under construction.
    #[derive(Default)]
    pub(crate) struct MsgBuilder {
        pub(crate) msgs: Vec<Vec<u8>>,
    }

    impl MsgBuilder {
        pub(crate) fn msg(&mut self, body: &[u8]) {
            self.msgs.push(body.to_vec());
        }
        pub(crate) fn def_struct(&mut self, id: i64, name: &str, fields: &[(&str, i64)]) {
            self.msgs.push(struct_def_body(id, name, fields));
        }
        pub(crate) fn def_slice(&mut self, id: i64, elem: i64) {
            let mut b = Vec::new();
            put_slice_def(&mut b, id, "[]T", elem);
            self.msgs.push(b);
        }
        pub(crate) fn def_map(&mut self, id: i64, key: i64, elem: i64) {
            let mut b = Vec::new();
            put_map_def(&mut b, id, "map[K]V", key, elem);
            self.msgs.push(b);
        }
    }

    pub(crate) fn struct_def_body(id: i64, name: &str, fields: &[(&str, i64)]) -> Vec<u8> {
        let mut b = Vec::new();
        put_struct_def(&mut b, id, name, fields);
        b
    }

    /// Feeds every message to a fresh decoder and returns the value.
    pub(crate) fn decode_all<T: GobDecode>(msgs: &[Vec<u8>]) -> Result<T, GobError> {
        let mut dec = Decoder::new();
        for m in msgs {
            if let Step::Value(v) = dec.feed::<T>(m)? {
                return Ok(v);
            }
        }
        Err(GobError::Truncated)
    }

    /// Splits a stream of length-prefixed messages into their bodies.
    pub(crate) fn split_messages(mut s: &[u8]) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        while let Ok(Some((w, n))) = crate::goplugin::gob::wire::parse_length_prefix(s) {
            let end = w + n as usize;
            out.push(s[w..end].to_vec());
            s = &s[end..];
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::super::decode::{Decoder, Ignored, Step};
    use super::super::time::GoTime;
    use super::test_support::*;
    use super::*;
    use crate::measurement::Phase;
    use chrono::{DateTime, Utc};

    super::super::decode::gob_struct! {
        struct Resp {
            service_method: String = "ServiceMethod",
            seq: u64 = "Seq",
            error: String = "Error",
        }
    }

    super::super::decode::gob_struct! {
        struct MeasurementBack {
            phase: String = "Phase",
            message: String = "Message",
            started_at: Option<GoTime> = "StartedAt",
            finished_at: Option<GoTime> = "FinishedAt",
            value: String = "Value",
            metadata: BTreeMap<String, String> = "Metadata",
            resume_at: Option<GoTime> = "ResumeAt",
        }
    }

    fn t(s: i64, n: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(s, n).unwrap()
    }

    #[test]
    fn measurement_response_decodes_back() {
        let m = Measurement {
            phase: Phase::Running,
            message: "waiting".into(),
            value: "[0.97]".into(),
            metadata: BTreeMap::from([("q".to_string(), "up".to_string())]),
            started_at: t(1_700_000_000, 5),
            finished_at: None,
            resume_at: Some(t(1_700_000_060, 0)),
        };
        let mut enc = Encoder::new();
        let mut out = Vec::new();
        enc.encode_response(&mut out, "Plugin.Run", 7, "", &Body::Measurement(&m));
        let msgs = split_messages(&out);
        let mut dec = Decoder::new();
        let mut values = 0;
        let mut it = msgs.iter();
        for msg in it.by_ref() {
            if let Step::Value(r) = dec.feed::<Resp>(msg).unwrap() {
                assert_eq!(
                    (r.service_method.as_str(), r.seq, r.error.as_str()),
                    ("Plugin.Run", 7, "")
                );
                values += 1;
                break;
            }
        }
        for msg in it {
            if let Step::Value(b) = dec.feed::<MeasurementBack>(msg).unwrap() {
                assert_eq!(b.phase, "Running");
                assert_eq!(b.message, "waiting");
                assert_eq!(b.value, "[0.97]");
                assert_eq!(b.metadata, m.metadata);
                assert_eq!(b.started_at, Some(GoTime(m.started_at)));
                assert_eq!(b.finished_at, None);
                assert_eq!(b.resume_at, Some(GoTime(t(1_700_000_060, 0))));
                values += 1;
            }
        }
        assert_eq!(values, 2);
        // The second reply on the stream sends no definitions again.
        let mut out2 = Vec::new();
        enc.encode_response(&mut out2, "Plugin.Run", 8, "", &Body::Measurement(&m));
        assert_eq!(split_messages(&out2).len(), 2);
    }

    #[test]
    fn error_response_carries_an_empty_struct() {
        let mut out = Vec::new();
        Encoder::new().encode_response(
            &mut out,
            "Plugin.X",
            1,
            "rpc: can't find method Plugin.X",
            &Body::Str("ignored"),
        );
        let msgs = split_messages(&out);
        // Response def, header, empty-struct def, empty value.
        assert_eq!(msgs.len(), 4);
        assert_eq!(msgs[3], [0xFF, 0x84, 0x00]);
        let mut dec = Decoder::new();
        for m in &msgs[..2] {
            if let Step::Value(r) = dec.feed::<Resp>(m).unwrap() {
                assert_eq!(r.error, "rpc: can't find method Plugin.X");
            }
        }
        assert!(matches!(
            dec.feed::<Ignored>(&msgs[2]).unwrap(),
            Step::TypeDefined
        ));
        assert!(matches!(
            dec.feed::<Ignored>(&msgs[3]).unwrap(),
            Step::Value(_)
        ));
    }

    #[test]
    fn singletons_are_framed_with_a_zero_delta() {
        let mut out = Vec::new();
        let mut enc = Encoder::new();
        enc.encode_body(&mut out, &Body::Uint(300));
        assert_eq!(out, [5, 0x06, 0x00, 0xFE, 0x01, 0x2C]);
        let mut out = Vec::new();
        enc.encode_body(&mut out, &Body::Str("ok"));
        assert_eq!(out, [5, 0x0C, 0x00, 2, b'o', b'k']);
        let mut out = Vec::new();
        enc.encode_body(&mut out, &Body::RpcError(""));
        let msgs = split_messages(&out);
        assert_eq!(msgs.last().unwrap(), &[0xFF, 0x8C, 0x00]);
    }

    #[test]
    fn long_messages_get_multi_byte_length_prefixes() {
        let long = "x".repeat(1000);
        let mut out = Vec::new();
        Encoder::new().encode_body(&mut out, &Body::Str(&long));
        assert_eq!(&out[..3], &[0xFE, 0x03, 0xED]);
        assert_eq!(split_messages(&out).len(), 1);
    }
}
