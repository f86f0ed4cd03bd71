//! Go's net/rpc server over one yamux stream (net/rpc/server.go, `ServeCodec` with the gob
//! codec): a gob `Request{ServiceMethod, Seq}` then the argument; answered by a gob
//! `Response{ServiceMethod, Seq, Error}` then the reply. One gob decoder and one encoder live
//! as long as the stream. Calls run concurrently and are answered as they finish.

use std::collections::BTreeMap;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::sync::{Mutex, Semaphore};

use super::gob::{gob_struct, Body, Decoder, Encoder, GobError, Step};
use super::yamux::Stream;
use crate::measurement::Measurement;

/// Largest gob message accepted on a stream.
pub(crate) const MAX_MESSAGE: u64 = 32 << 20;
/// Calls one stream may have in flight; reading pauses beyond this.
const MAX_IN_FLIGHT: usize = 512;

gob_struct! {
    /// net/rpc's request header.
    pub(crate) struct RequestHeader {
        pub(crate) service_method: String = "ServiceMethod",
        pub(crate) seq: u64 = "Seq",
    }
}

/// Why a stream stopped being served.
#[derive(Debug, thiserror::Error)]
pub(crate) enum RpcError {
    #[error("net/rpc: {0}")]
    Gob(#[from] GobError),
    #[error("net/rpc: message of {0} bytes is too large")]
    TooLarge(u64),
    #[error("net/rpc: stream ended inside a message")]
    UnexpectedEof,
}

/// Splits a stream's bytes into gob messages.
pub(crate) struct MessageReader {
    stream: Stream,
    buf: BytesMut,
}

impl MessageReader {
    pub(crate) fn new(stream: Stream) -> Self {
        MessageReader {
            stream,
            buf: BytesMut::new(),
        }
    }

    /// Reads more bytes into the buffer; `false` at end of stream.
    async fn fill(&mut self) -> bool {
        match self.stream.read().await {
            Some(chunk) => {
                self.buf.extend_from_slice(&chunk);
                true
            }
            None => false,
        }
    }

    /// The next `n` raw bytes (the broker's stream id); `None` if the stream ends first.
    pub(crate) async fn read_exact(&mut self, n: usize) -> Option<Bytes> {
        while self.buf.len() < n {
            if !self.fill().await {
                return None;
            }
        }
        Some(self.buf.split_to(n).freeze())
    }

    /// The next message body; `Ok(None)` at a clean end of stream.
    pub(crate) async fn next_message(&mut self) -> Result<Option<Bytes>, RpcError> {
        loop {
            if let Some((width, len)) = super::gob::wire::parse_length_prefix(&self.buf)? {
                if len > MAX_MESSAGE {
                    return Err(RpcError::TooLarge(len));
                }
                // At most MAX_MESSAGE (checked above): fits a usize.
                #[allow(clippy::cast_possible_truncation)]
                let len = len as usize;
                let total = width + len;
                // Nothing is reserved for the announced length: the buffer grows only as
                // bytes arrive.
                if self.buf.len() >= total {
                    self.buf.advance(width);
                    return Ok(Some(self.buf.split_to(len).freeze()));
                }
            }
            if !self.fill().await {
                return if self.buf.is_empty() {
                    Ok(None)
                } else {
                    Err(RpcError::UnexpectedEof)
                };
            }
        }
    }
}

/// A reply value owned by a finished call.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Reply {
    Empty,
    Uint(u64),
    Str(String),
    StrMap(BTreeMap<String, String>),
    Measurement(Measurement),
    RpcError(String),
}

impl Reply {
    fn body(&self) -> Body<'_> {
        match self {
            Reply::Empty => Body::Empty,
            Reply::Uint(v) => Body::Uint(*v),
            Reply::Str(s) => Body::Str(s),
            Reply::StrMap(m) => Body::StrMap(m),
            Reply::Measurement(m) => Body::Measurement(m),
            Reply::RpcError(e) => Body::RpcError(e),
        }
    }
}

/// What a call produced: a reply or an error string for the response header, and something
/// to run once the response has been handed to the stream.
pub(crate) struct Outcome {
    pub(crate) reply: Result<Reply, String>,
    pub(crate) after: Option<BoxFuture<'static, ()>>,
}

impl Outcome {
    pub(crate) fn ok(reply: Reply) -> Self {
        Outcome {
            reply: Ok(reply),
            after: None,
        }
    }

    pub(crate) fn err(msg: impl Into<String>) -> Self {
        Outcome {
            reply: Err(msg.into()),
            after: None,
        }
    }
}

/// A set of net/rpc methods served on a stream.
pub(crate) trait Service: Send + Sync + 'static {
    /// A decoded call, ready to run.
    type Call: Send + 'static;

    /// Feeds one message of the argument of `method`. A complete argument yields the call, or
    /// the error text to answer with (unknown method, invalid argument).
    fn feed(
        &self,
        method: &str,
        dec: &mut Decoder,
        msg: &[u8],
    ) -> Result<Step<Result<Self::Call, String>>, GobError>;

    /// Runs a call.
    fn call(self: Arc<Self>, call: Self::Call) -> impl Future<Output = Outcome> + Send;
}

/// Go's answer for a method no service has (server.go, `readRequestHeader`).
pub(crate) fn not_found(method: &str, services: &[&str]) -> String {
    match method.rfind('.') {
        None => format!("rpc: service/method request ill-formed: {method}"),
        Some(dot) if !services.contains(&&method[..dot]) => {
            format!("rpc: can't find service {method}")
        }
        Some(_) => format!("rpc: can't find method {method}"),
    }
}

/// The writing half of a served stream; the stream is half-closed when the last call holding
/// it has answered.
struct ReplyWriter {
    stream: Stream,
    state: Mutex<(Encoder, Vec<u8>)>,
}

impl ReplyWriter {
    async fn respond(&self, header: &RequestHeader, reply: &Result<Reply, String>) {
        let mut st = self.state.lock().await;
        let (enc, buf) = &mut *st;
        buf.clear();
        match reply {
            Ok(r) => enc.encode_response(buf, &header.service_method, header.seq, "", &r.body()),
            Err(e) => {
                let e = if e.is_empty() {
                    "unknown error"
                } else {
                    e.as_str()
                };
                enc.encode_response(buf, &header.service_method, header.seq, e, &Body::Empty)
            }
        }
        if let Err(e) = self.stream.write_all(buf).await {
            tracing::debug!(error = %e, stream = self.stream.id(), "net/rpc: writing response");
        }
    }
}

impl Drop for ReplyWriter {
    fn drop(&mut self) {
        self.stream.close();
    }
}

/// Serves `service` on `stream` until the client closes it. Garbage ends this stream only.
pub(crate) async fn serve<S: Service>(service: Arc<S>, mut reader: MessageReader) {
    let stream = reader.stream.clone();
    let writer = Arc::new(ReplyWriter {
        stream: stream.clone(),
        state: Mutex::new((Encoder::new(), Vec::new())),
    });
    let in_flight = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut dec = Decoder::new();
    loop {
        let Ok(permit) = in_flight.clone().acquire_owned().await else {
            break;
        };
        let header = match read_header(&mut reader, &mut dec).await {
            Ok(Some(h)) => h,
            Ok(None) => break,
            Err(e) => {
                // Go closes the connection when a header does not decode.
                tracing::warn!(error = %e, stream = stream.id(), "net/rpc: bad request header, resetting stream");
                stream.reset();
                return;
            }
        };
        let call = loop {
            let msg = match reader.next_message().await {
                Ok(Some(m)) => m,
                Ok(None) => return,
                Err(e) => {
                    tracing::warn!(error = %e, stream = stream.id(), "net/rpc: bad request body, resetting stream");
                    stream.reset();
                    return;
                }
            };
            match service.feed(&header.service_method, &mut dec, &msg) {
                Ok(Step::Value(call)) => break call,
                Ok(Step::TypeDefined | Step::NeedMore) => continue,
                Err(e) => break Err(e.to_string()),
            }
        };
        let writer = writer.clone();
        match call {
            Ok(call) => {
                let service = service.clone();
                tokio::spawn(async move {
                    let outcome = match AssertUnwindSafe(service.call(call)).catch_unwind().await {
                        Ok(o) => o,
                        Err(p) => Outcome::err(format!("plugin panicked: {}", panic_message(&*p))),
                    };
                    writer.respond(&header, &outcome.reply).await;
                    drop(permit);
                    if let Some(after) = outcome.after {
                        after.await;
                    }
                });
            }
            Err(msg) => {
                writer.respond(&header, &Err(msg)).await;
                drop(permit);
            }
        }
    }
}

async fn read_header(
    reader: &mut MessageReader,
    dec: &mut Decoder,
) -> Result<Option<RequestHeader>, RpcError> {
    loop {
        let Some(msg) = reader.next_message().await? else {
            return Ok(None);
        };
        if let Step::Value(h) = dec.feed::<RequestHeader>(&msg)? {
            return Ok(Some(h));
        }
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_matches_go() {
        let svcs = ["Plugin"];
        assert_eq!(
            not_found("Plugin.Nope", &svcs),
            "rpc: can't find method Plugin.Nope"
        );
        assert_eq!(
            not_found("Other.Run", &svcs),
            "rpc: can't find service Other.Run"
        );
        assert_eq!(
            not_found("nodot", &svcs),
            "rpc: service/method request ill-formed: nodot"
        );
    }
}
