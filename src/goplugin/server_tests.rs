//! The whole server in process, driven by a hand-rolled yamux + gob client over a unix socket:
//! stream layout, dispensing, error replies, garbage isolation and Quit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use chrono::Utc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::gob::wire::{parse_length_prefix, put_bytes, put_int, put_uint};
use super::gob::{gob_struct, Decoder, Ignored, Step};
use super::yamux::Header;
use super::{serve_listener, MetricProviderHandler};
use crate::argo::{AnalysisRunRef, ArgoMetric};
use crate::measurement::Measurement;

const DATA: u8 = 0;
const WINDOW: u8 = 1;
const SYN: u16 = 1;
const FIN: u16 = 4;
const RST: u16 = 8;

struct Echo;

impl MetricProviderHandler for Echo {
    async fn init_plugin(&self) -> Result<(), String> {
        Ok(())
    }
    async fn run(&self, run: AnalysisRunRef, _: ArgoMetric) -> Measurement {
        Measurement::error(run.name, Utc::now())
    }
    async fn resume(&self, _: AnalysisRunRef, _: ArgoMetric, m: Measurement) -> Measurement {
        m
    }
    async fn terminate(&self, _: AnalysisRunRef, _: ArgoMetric, m: Measurement) -> Measurement {
        m
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
        "Echo".into()
    }
    fn get_metadata(&self, _: ArgoMetric) -> BTreeMap<String, String> {
        panic!("metadata exploded")
    }
}

gob_struct! {
    struct Response {
        service_method: String = "ServiceMethod",
        seq: u64 = "Seq",
        error: String = "Error",
    }
}

/// What the host's net/rpc client would write, one gob encoder per stream.
#[derive(Default)]
struct RequestEncoder {
    defined: bool,
}

impl RequestEncoder {
    fn message(out: &mut Vec<u8>, body: &[u8]) {
        put_uint(out, body.len() as u64);
        out.extend_from_slice(body);
    }

    fn request(&mut self, method: &str, seq: u64, arg: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.defined {
            self.defined = true;
            let mut def = Vec::new();
            super::gob::encode_struct_def_for_tests(
                &mut def,
                65,
                "Request",
                &[("ServiceMethod", 6), ("Seq", 3)],
            );
            Self::message(&mut out, &def);
        }
        let mut h = Vec::new();
        put_int(&mut h, 65);
        put_uint(&mut h, 1);
        put_bytes(&mut h, method.as_bytes());
        if seq != 0 {
            put_uint(&mut h, 1);
            put_uint(&mut h, seq);
        }
        h.push(0);
        Self::message(&mut out, &h);
        Self::message(&mut out, arg);
        out
    }
}

fn bool_arg() -> Vec<u8> {
    vec![0x02, 0x00, 0x01]
}

fn string_arg(s: &str) -> Vec<u8> {
    let mut v = vec![0x0C, 0x00];
    put_bytes(&mut v, s.as_bytes());
    v
}

fn nil_interface_arg() -> Vec<u8> {
    vec![0x10, 0x00, 0x00]
}

/// A yamux client that collects each stream's bytes and flags.
struct Client {
    sock: UnixStream,
    data: HashMap<u32, Vec<u8>>,
    flags: HashMap<u32, u16>,
    decoders: HashMap<u32, Decoder>,
}

impl Client {
    async fn connect(path: &std::path::Path) -> Client {
        Client {
            sock: UnixStream::connect(path).await.unwrap(),
            data: HashMap::new(),
            flags: HashMap::new(),
            decoders: HashMap::new(),
        }
    }

    async fn frame(&mut self, ty: u8, flags: u16, stream: u32, body: &[u8]) {
        let h = Header {
            ty,
            flags,
            stream,
            length: if ty == DATA { body.len() as u32 } else { 0 },
        };
        self.sock.write_all(&h.encode()).await.unwrap();
        self.sock.write_all(body).await.unwrap();
    }

    async fn open(&mut self, stream: u32) {
        self.frame(WINDOW, SYN, stream, &[]).await;
    }

    async fn send(&mut self, stream: u32, body: &[u8]) {
        self.frame(DATA, 0, stream, body).await;
    }

    /// Reads frames until `done` holds, for at most 5 s.
    async fn pump_until(&mut self, mut done: impl FnMut(&Client) -> bool) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while !done(self) {
            let mut h = [0u8; 12];
            tokio::time::timeout_at(deadline, self.sock.read_exact(&mut h))
                .await
                .expect("timed out waiting for the plugin")
                .unwrap();
            let h = Header::parse(&h).unwrap();
            *self.flags.entry(h.stream).or_default() |= h.flags;
            if h.ty == DATA {
                let mut body = vec![0u8; h.length as usize];
                self.sock.read_exact(&mut body).await.unwrap();
                self.data
                    .entry(h.stream)
                    .or_default()
                    .extend_from_slice(&body);
            }
        }
    }

    /// The next complete response on `stream`: header, and the body decoded as `T`.
    async fn response<T: super::gob::GobDecode>(&mut self, stream: u32) -> (Response, T) {
        let mut header = None;
        loop {
            let buf = self.data.entry(stream).or_default();
            if let Ok(Some((w, n))) = parse_length_prefix(buf) {
                let end = w + n as usize;
                if buf.len() >= end {
                    let msg: Vec<u8> = buf.drain(..end).skip(w).collect();
                    let dec = self.decoders.entry(stream).or_default();
                    match header.take() {
                        None => {
                            if let Step::Value(h) = dec.feed::<Response>(&msg).unwrap() {
                                header = Some(h);
                            }
                        }
                        Some(h) => match dec.feed::<T>(&msg).unwrap() {
                            Step::Value(v) => return (h, v),
                            _ => header = Some(h),
                        },
                    }
                    continue;
                }
            }
            let before = self.data.get(&stream).map_or(0, Vec::len);
            self.pump_until(|c| c.data.get(&stream).map_or(0, Vec::len) > before)
                .await;
        }
    }
}

#[tokio::test]
async fn serves_control_and_dispensed_streams_and_quits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(serve_listener(Arc::new(Echo), listener, true));

    let mut c = Client::connect(&path).await;
    for id in [1, 3, 5] {
        c.open(id).await;
    }
    let mut control = RequestEncoder::default();
    c.send(1, &control.request("Control.Ping", 0, &bool_arg()))
        .await;
    let (h, Ignored) = c.response::<Ignored>(1).await;
    assert_eq!(
        (h.service_method.as_str(), h.error.as_str()),
        ("Control.Ping", "")
    );

    c.send(
        1,
        &control.request("Dispenser.Dispense", 1, &string_arg("Nope")),
    )
    .await;
    let (h, Ignored) = c.response::<Ignored>(1).await;
    assert_eq!(h.error, "unknown plugin type: Nope");

    c.send(
        1,
        &control.request(
            "Dispenser.Dispense",
            2,
            &string_arg("RpcMetricProviderPlugin"),
        ),
    )
    .await;
    let (h, id) = c.response::<u64>(1).await;
    assert_eq!((h.seq, h.error.as_str()), (2, ""));
    let id = id as u32;

    // A stream with an id never dispensed is reset.
    c.open(7).await;
    c.send(7, &(id + 100).to_le_bytes()).await;
    c.pump_until(|c| c.flags.get(&7).is_some_and(|f| f & RST != 0))
        .await;

    // The dispensed id is echoed, then Plugin is served.
    c.open(9).await;
    c.send(9, &id.to_le_bytes()).await;
    c.pump_until(|c| c.data.get(&9).is_some_and(|d| d.len() >= 4))
        .await;
    let echoed: Vec<u8> = c.data.get_mut(&9).unwrap().drain(..4).collect();
    assert_eq!(echoed, id.to_le_bytes());
    let mut plugin = RequestEncoder::default();
    c.send(9, &plugin.request("Plugin.Type", 1, &nil_interface_arg()))
        .await;
    let (h, ty) = c.response::<String>(9).await;
    assert_eq!((h.seq, ty.as_str()), (1, "Echo"));
    c.send(9, &plugin.request("Plugin.Nope", 2, &nil_interface_arg()))
        .await;
    let (h, Ignored) = c.response::<Ignored>(9).await;
    assert_eq!(h.error, "rpc: can't find method Plugin.Nope");
    // Run's argument must be a RunArgs interface: nil is refused like Argo's own server does.
    c.send(9, &plugin.request("Plugin.Run", 3, &nil_interface_arg()))
        .await;
    let (h, Ignored) = c.response::<Ignored>(9).await;
    assert_eq!(h.error, "invalid args <nil>");
    // A panicking handler answers with an error, and the plugin keeps serving.
    let mut md_arg = vec![0x10, 0x00];
    put_bytes(&mut md_arg, b"GetMetadataArgs");
    let mut def = Vec::new();
    super::gob::encode_struct_def_for_tests(&mut def, 66, "GetMetadataArgs", &[("Metric", 67)]);
    md_arg.extend_from_slice(&def);
    put_uint(&mut md_arg, 1); // the delimited chunk's count after an inline definition
    let mut def = Vec::new();
    super::gob::encode_struct_def_for_tests(&mut def, 67, "Metric", &[("Name", 6)]);
    md_arg.extend_from_slice(&def);
    put_uint(&mut md_arg, 1);
    md_arg.extend_from_slice(&[0xFF, 0x84, 0x05, 0x01, 0x01, 0x01, b'm', 0x00, 0x00]);
    c.send(9, &plugin.request("Plugin.GetMetadata", 4, &md_arg))
        .await;
    let (h, Ignored) = c.response::<Ignored>(9).await;
    assert!(h.error.contains("metadata exploded"), "{}", h.error);

    // Garbage on the plugin stream: a header that is no gob value. That stream is reset...
    c.send(9, &[0x03, 0xFF, 0xFF, 0xFF]).await;
    c.pump_until(|c| c.flags.get(&9).is_some_and(|f| f & RST != 0))
        .await;
    // ...and the control stream still answers.
    c.send(1, &control.request("Control.Ping", 3, &bool_arg()))
        .await;
    let (h, Ignored) = c.response::<Ignored>(1).await;
    assert_eq!((h.seq, h.error.as_str()), (3, ""));

    // Quit: answered, then serve_listener returns well within a second.
    c.send(1, &control.request("Control.Quit", 4, &bool_arg()))
        .await;
    let (h, Ignored) = c.response::<Ignored>(1).await;
    assert_eq!(
        (h.service_method.as_str(), h.error.as_str()),
        ("Control.Quit", "")
    );
    let t0 = std::time::Instant::now();
    tokio::time::timeout(Duration::from_secs(1), server)
        .await
        .expect("serve_listener did not return after Quit")
        .unwrap()
        .unwrap();
    assert!(t0.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn host_hanging_up_ends_serving() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.sock");
    let listener = tokio::net::UnixListener::bind(&path).unwrap();
    let server = tokio::spawn(serve_listener(Arc::new(Echo), listener, true));
    let mut c = Client::connect(&path).await;
    c.open(1).await;
    c.frame(WINDOW, FIN, 1, &[]).await;
    drop(c);
    tokio::time::timeout(Duration::from_secs(5), server)
        .await
        .expect("serve_listener did not return after the host hung up")
        .unwrap()
        .unwrap();
}
