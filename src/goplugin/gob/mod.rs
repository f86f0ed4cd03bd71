//! Go's `encoding/gob`, reduced to what the net/rpc plugin protocol needs: a decoder that
//! reads remote type definitions and decodes values straight into typed structs (skipping
//! what they do not name), and an encoder for rollgate's fixed set of reply types.

mod decode;
mod encode;
mod scan;
#[doc(hidden)]
pub mod testkit;
mod time;
mod types;
pub(crate) mod wire;

pub(crate) use decode::gob_struct;
pub use decode::{Decoder, GobDecode, Ignored, Step};
pub(crate) use decode::{Interface, Registered, Seq, ValueDecoder};
pub(crate) use encode::{Body, Encoder};
pub(crate) use time::{go_zero_time, GoTime};

#[cfg(test)]
pub(crate) use encode::put_struct_def as encode_struct_def_for_tests;
#[cfg(test)]
pub(crate) use encode::test_support;

/// Why a gob value could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GobError {
    /// A value ran past the end of its message.
    #[error("gob: unexpected end of message")]
    Truncated,
    /// Bytes that no Go encoder produces.
    #[error("gob: corrupted data: {0}")]
    Corrupt(&'static str),
    /// Input beyond what rollgate accepts (sizes, counts, nesting).
    #[error("gob: limit exceeded: {0}")]
    Limit(&'static str),
    /// The remote type cannot decode into the local one.
    #[error("gob: type mismatch: remote type id {remote} cannot decode into {local}")]
    Mismatch { local: &'static str, remote: i64 },
    /// A type id the stream never defined.
    #[error("gob: undefined type id {0}")]
    UndefinedType(i64),
    /// An interface holding another registered type than expected.
    #[error("gob: interface holds {got:?}, expected {want:?}")]
    UnexpectedInterface { want: &'static str, got: String },
    /// Internal: the value continues in a message not received yet.
    #[error("gob: value continues in a later message")]
    NeedMore,
}
