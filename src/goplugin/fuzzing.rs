//! Entry points for the fuzz targets in `fuzz/` (doc-hidden: not a supported API). They drive
//! the real decoders exactly as the server does, so the fuzzers test the shipped code rather
//! than a copy of it.

use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;

use super::argo::PluginService;
use super::gob::wire::parse_length_prefix;
use super::gob::{Decoder, GobError, Ignored, Step};
use super::netrpc::{RequestHeader, Service, MAX_MESSAGE};
use super::yamux::{Header, YamuxError, HEADER_SIZE};
use super::MetricProviderHandler;
use crate::argo::{AnalysisRunRef, ArgoMetric};
use crate::measurement::{Measurement, Phase};

/// Splits a net/rpc byte stream into gob message bodies, refusing a length over the stream
/// limit as the stream reader does. A truncated last message is dropped.
pub fn split_messages(mut bytes: &[u8]) -> Result<Vec<&[u8]>, GobError> {
    let mut out = Vec::new();
    while let Some((width, len)) = parse_length_prefix(bytes)? {
        if len > MAX_MESSAGE {
            return Err(GobError::Limit("message too long"));
        }
        let Some(body) =
            bytes.get(width..width.saturating_add(usize::try_from(len).unwrap_or(usize::MAX)))
        else {
            break;
        };
        out.push(body);
        bytes = &bytes[width + body.len()..];
    }
    Ok(out)
}

/// One decoded call of a request stream: its sequence number, method, and the call's debug
/// form or the error the server would answer with.
pub type DecodedCall = (u64, String, Result<String, String>);

/// Decodes a request stream (net/rpc headers, then each call's argument: `Plugin.*`,
/// `Control.*` and `Dispenser.Dispense`) as the server's stream loop does. Returns the calls
/// decoded, or the gob error that ends the stream.
pub fn decode_request_stream(bytes: &[u8]) -> (Vec<DecodedCall>, Option<GobError>) {
    let msgs = match split_messages(bytes) {
        Ok(m) => m,
        Err(e) => return (Vec::new(), Some(e)),
    };
    let plugin = PluginService::new(Arc::new(Idle));
    let mut dec = Decoder::new();
    let mut out = Vec::new();
    let mut header: Option<RequestHeader> = None;
    for msg in msgs {
        let step = match header.take() {
            None => match dec.feed::<RequestHeader>(msg) {
                Ok(Step::Value(h)) => {
                    header = Some(h);
                    continue;
                }
                Ok(_) => continue,
                Err(e) => return (out, Some(e)),
            },
            Some(h) => {
                let r = match h.service_method.as_str() {
                    "Dispenser.Dispense" => dec
                        .feed::<String>(msg)
                        .map(|s| map(s, |name| Ok(format!("Dispense({name:?})")))),
                    m if m.starts_with("Plugin.") => plugin
                        .feed(m, &mut dec, msg)
                        .map(|s| map(s, |c| c.map(|c| format!("{c:?}")))),
                    _ => dec
                        .feed::<Ignored>(msg)
                        .map(|s| map(s, |_| Ok("ignored".into()))),
                };
                (h, r)
            }
        };
        match step {
            (h, Ok(Step::Value(call))) => out.push((h.seq, h.service_method, call)),
            (h, Ok(_)) => header = Some(h),
            (_, Err(e)) => return (out, Some(e)),
        }
    }
    (out, None)
}

fn map<T, U>(s: Step<T>, f: impl FnOnce(T) -> U) -> Step<U> {
    match s {
        Step::Value(v) => Step::Value(f(v)),
        Step::NeedMore => Step::NeedMore,
        Step::TypeDefined => Step::TypeDefined,
    }
}

/// Parses one yamux frame header: `(type, flags, stream, length)`.
pub fn parse_yamux_header(h: &[u8; HEADER_SIZE]) -> Result<(u8, u16, u32, u32), YamuxError> {
    Header::parse(h).map(|h| (h.ty, h.flags, h.stream, h.length))
}

/// The yamux frame header size.
pub const YAMUX_HEADER_SIZE: usize = HEADER_SIZE;

/// What a whole plugin session did with an input.
#[derive(Debug, Clone, Copy)]
pub struct SessionOutcome {
    /// Bytes the server wrote back.
    pub written: usize,
    /// Whether the session ended within the budget after the input ended.
    pub ended: bool,
}

/// Serves one plugin session (yamux, the control and dispenser services, net/rpc, the
/// `Plugin` service with a handler that answers at once) on an in-memory connection: writes
/// each chunk of `input` and lets the server answer for 100 ms after each (as a host waits for
/// the `Dispense` answer before opening the stream), closes the write side, and reads
/// everything the server answers until the session ends or `budget` (counted from the input's
/// end) runs out. On a runtime with a paused clock
/// the 100 ms pass as soon as every task is idle.
pub async fn serve_session_bytes(input: &[&[u8]], budget: Duration) -> SessionOutcome {
    let (server_io, mut client) = tokio::io::duplex(64 * 1024);
    let (quit, _quit_rx) = watch::channel(false);
    let session = tokio::spawn(super::server::serve_session(
        Arc::new(Idle),
        server_io,
        quit,
    ));
    let (mut rd, mut wr) = tokio::io::split(&mut client);
    let write = async {
        for chunk in input {
            let _ = wr.write_all(chunk).await;
            // Closing at once would end the session before its streams answer.
            tokio::time::sleep(SETTLE).await;
        }
        let _ = wr.shutdown().await;
    };
    let mut written = 0usize;
    let read = async {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = rd.read(&mut buf).await {
            if n == 0 {
                break;
            }
            written += n;
        }
    };
    let settling = SETTLE.saturating_mul(u32::try_from(input.len()).unwrap_or(u32::MAX));
    let ended = tokio::time::timeout(budget.saturating_add(settling), async {
        tokio::join!(write, read);
        let _ = session.await;
    })
    .await
    .is_ok();
    SessionOutcome { written, ended }
}

/// How long the server may answer after each chunk of input.
const SETTLE: Duration = Duration::from_millis(100);

/// A handler that answers every call at once and measures nothing: for driving the protocol
/// (the fuzz targets, the decoding tests).
pub(crate) struct Idle;

impl MetricProviderHandler for Idle {
    async fn init_plugin(&self) -> Result<(), String> {
        Ok(())
    }
    async fn run(&self, _: AnalysisRunRef, _: ArgoMetric) -> Measurement {
        Measurement::error("fuzz", Utc::now())
    }
    async fn resume(&self, _: AnalysisRunRef, _: ArgoMetric, m: Measurement) -> Measurement {
        m
    }
    async fn terminate(&self, _: AnalysisRunRef, _: ArgoMetric, m: Measurement) -> Measurement {
        Measurement {
            phase: Phase::Successful,
            ..m
        }
    }
    async fn garbage_collect(
        &self,
        _: AnalysisRunRef,
        _: ArgoMetric,
        _: i64,
    ) -> Result<(), String> {
        Ok(())
    }
    fn type_name(&self) -> String {
        "fuzz".into()
    }
    fn get_metadata(&self, _: ArgoMetric) -> std::collections::BTreeMap<String, String> {
        Default::default()
    }
}
