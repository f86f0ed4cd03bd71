//! The one HTTP stub of the tests: a small HTTP/1.1 server on 127.0.0.1, plain or TLS, that
//! records what it was sent and answers either
//! - every request the same way, whatever the path (`Stub::start(Mode)`: a fake Prometheus for
//!   fault tests), or
//! - by a script called with each request and its index (`Stub::script`, `Stub::script_tls`:
//!   the client tests, which vary answers per request and break the protocol on purpose with
//!   `Reply`). A scripted answer closes its connection, as `Connection: close` says.
//!
//! One thread accepts, one thread serves each connection (keep-alive and pipelining included),
//! at most `MAX_CONNECTIONS` at once. Dropping the `Stub` stops it: every thread notices within
//! about 50 ms (connections held by `NeverAnswer` or `Reply::Silent` are closed then) and is
//! joined.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio_rustls::rustls;

/// Most connections served at once; further ones are closed as soon as they are accepted.
pub const MAX_CONNECTIONS: usize = 512;
const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 16 * 1024 * 1024;
const POLL: Duration = Duration::from_millis(50);
/// Requests kept for `Stub::request`; later ones are only counted (load tests send millions).
const MAX_RECORDED: usize = 10_000;

/// The `error` text of `Mode::ApiError`.
pub const API_ERROR_MESSAGE: &str =
    "invalid parameter \"query\": 1:1: parse error: unexpected end of input";
/// The warning of `Mode::Warnings`.
pub const WARNING_MESSAGE: &str = "partial response: store gateway edge-eu-1 unavailable";
/// The single sample value of `Mode::Warnings` (at `SAMPLE_TIME`).
pub const WARNINGS_VALUE: f64 = 0.5;
/// Timestamp of the samples in generated bodies.
pub const SAMPLE_TIME: i64 = 1_700_000_000;

/// How the stub answers.
#[derive(Clone, Debug)]
pub enum Mode {
    /// This HTTP status with this body (`Content-Type: application/json`).
    Status(u16, String),
    /// Reads the request, never replies; the connection stays open until the client gives up
    /// or the stub is dropped.
    NeverAnswer,
    /// 200 with truncated JSON.
    Garbage,
    /// 400 with `{"status":"error","errorType":"bad_data","error":API_ERROR_MESSAGE}`, as
    /// Prometheus answers a query it cannot parse.
    ApiError,
    /// 200 with a one-sample vector (`WARNINGS_VALUE`) and `"warnings":[WARNING_MESSAGE]`.
    Warnings,
    /// 200 with a valid vector body of exactly this many bytes (or the smallest such body, if
    /// larger), padded with JSON whitespace.
    Huge(usize),
    /// 200 with this body, at once (for overhead benchmarks).
    Fixed(String),
    /// Waits this long, then answers as the inner mode.
    Slow(Duration, Box<Mode>),
}

/// The answer prepared from a `Mode` (bodies are built once, not per request).
struct Prepared {
    status: u16,
    body: Arc<Vec<u8>>,
    delay: Duration,
    never: bool,
}

fn prepare(mode: &Mode) -> Prepared {
    let reply = |status: u16, body: Vec<u8>| Prepared {
        status,
        body: Arc::new(body),
        delay: Duration::ZERO,
        never: false,
    };
    match mode {
        Mode::Status(code, body) => reply(*code, body.clone().into_bytes()),
        Mode::NeverAnswer => Prepared {
            never: true,
            ..reply(200, vec![])
        },
        Mode::Garbage => reply(
            200,
            format!(
                r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{}},"value":[{SAMPLE_TIME},"0.5"#
            )
            .into_bytes(),
        ),
        Mode::ApiError => reply(
            400,
            serde_json::json!({"status": "error", "errorType": "bad_data", "error": API_ERROR_MESSAGE})
                .to_string()
                .into_bytes(),
        ),
        Mode::Warnings => reply(
            200,
            serde_json::json!({
                "status": "success",
                "data": {"resultType": "vector", "result": [
                    {"metric": {"service": "stub"}, "value": [SAMPLE_TIME, WARNINGS_VALUE.to_string()]}
                ]},
                "warnings": [WARNING_MESSAGE],
            })
            .to_string()
            .into_bytes(),
        ),
        Mode::Huge(n) => reply(200, huge_body(*n)),
        Mode::Fixed(body) => reply(200, body.clone().into_bytes()),
        Mode::Slow(d, inner) => Prepared {
            delay: *d,
            ..prepare(inner)
        },
    }
}

/// A valid Prometheus vector body of exactly `n` bytes (when `n` allows it).
pub fn huge_body(n: usize) -> Vec<u8> {
    let mut out = br#"{"status":"success","data":{"resultType":"vector","result":["#.to_vec();
    let tail = b"]}}";
    for i in 0.. {
        let item = format!(
            r#"{}{{"metric":{{"__name__":"huge","i":"{i}"}},"value":[{SAMPLE_TIME},"1"]}}"#,
            if i > 0 { "," } else { "" }
        );
        if out.len() + item.len() + tail.len() > n {
            break;
        }
        out.extend_from_slice(item.as_bytes());
    }
    while out.len() + tail.len() < n {
        out.push(b' ');
    }
    out.extend_from_slice(tail);
    out
}

/// A scripted answer (`Stub::script`); the connection is closed after it.
pub enum Reply {
    /// A complete response with Content-Length.
    Full { status: u16, body: Vec<u8> },
    /// Keep the connection open and never answer (until the client gives up or the stub stops).
    Silent,
    /// Declare `declared` bytes but send only `body`, then close.
    Truncated { declared: usize, body: Vec<u8> },
    /// Send a head without Content-Length, then `body`, then close (close-delimited).
    CloseDelimited { status: u16, body: Vec<u8> },
    /// A redirect (status 3xx) to `location`, with a small HTML body.
    Redirect { status: u16, location: String },
    /// Chunked encoding, `chunks` pieces of `size` bytes each.
    Chunked {
        status: u16,
        chunks: usize,
        size: usize,
    },
}

/// A complete JSON answer.
pub fn json(status: u16, body: &str) -> Reply {
    Reply::Full {
        status,
        body: body.as_bytes().to_vec(),
    }
}

/// A Prometheus vector body with one sample of this value.
pub fn vector_body(value: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"job":"api"}},"value":[1712345678.5,"{value}"]}}]}}}}"#
    )
}

/// One request as the stub received it.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The request target: path and query string.
    pub target: String,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (chunked bodies decoded).
    pub body: Vec<u8>,
}

impl Request {
    /// The first header of that name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The path without the query string.
    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or_default()
    }

    /// A parameter from the query string or, failing that, from a form-encoded body (decoded).
    pub fn param(&self, name: &str) -> Option<String> {
        let query = self.target.split_once('?').map(|(_, q)| q).unwrap_or("");
        let body = String::from_utf8_lossy(&self.body);
        [query, body.as_ref()].iter().find_map(|src| {
            src.split('&').find_map(|kv| {
                let (k, v) = kv.split_once('=')?;
                (urldecode(k) == name).then(|| urldecode(v))
            })
        })
    }
}

/// Decodes `%XX` and `+` of a form/query component.
pub fn urldecode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => match b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(v) => {
                    out.push(v);
                    i += 2;
                }
                None => out.push(b'%'),
            },
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

type Script = Arc<dyn Fn(&Request, usize) -> Reply + Send + Sync>;

/// How the stub answers: one prepared answer for every request, or a script.
#[derive(Clone)]
enum Answer {
    Same(Arc<Prepared>),
    Script(Script),
}

struct State {
    answer: Mutex<Answer>,
    stop: AtomicBool,
    requests: AtomicUsize,
    connections: AtomicUsize,
    open: AtomicUsize,
    last: Mutex<Option<Request>>,
    recorded: Mutex<Vec<Request>>,
    workers: Mutex<Vec<JoinHandle<()>>>,
}

/// A running fake Prometheus; stops on drop.
pub struct Stub {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    /// The listening address.
    pub addr: SocketAddr,
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
}

impl Stub {
    /// Starts a stub answering as `mode`.
    pub fn start(mode: Mode) -> Stub {
        Stub::serve(Answer::Same(Arc::new(prepare(&mode))), None)
    }

    /// Starts a stub answering each request with `script(request, index)` (index from 0).
    pub fn script(script: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static) -> Stub {
        Stub::serve(Answer::Script(Arc::new(script)), None)
    }

    /// `script` over TLS with this server configuration.
    pub fn script_tls(
        tls: Arc<rustls::ServerConfig>,
        script: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static,
    ) -> Stub {
        Stub::serve(Answer::Script(Arc::new(script)), Some(tls))
    }

    fn serve(answer: Answer, tls: Option<Arc<rustls::ServerConfig>>) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(State {
            answer: Mutex::new(answer),
            stop: AtomicBool::new(false),
            requests: AtomicUsize::new(0),
            connections: AtomicUsize::new(0),
            open: AtomicUsize::new(0),
            last: Mutex::new(None),
            recorded: Mutex::new(Vec::new()),
            workers: Mutex::new(Vec::new()),
        });
        let st = state.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, st, tls));
        Stub {
            url: format!("http://{addr}"),
            addr,
            state,
            accept: Some(accept),
        }
    }

    /// Answers later requests as `mode` instead.
    pub fn set_mode(&self, mode: Mode) {
        *self.state.answer.lock().unwrap() = Answer::Same(Arc::new(prepare(&mode)));
    }

    /// Requests received so far (counted once fully read, before the answer).
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// The most recent request.
    pub fn last_request(&self) -> Option<Request> {
        self.state.last.lock().unwrap().clone()
    }

    /// The request of this index (from 0, in the order they were read; the first
    /// `MAX_RECORDED` are kept).
    pub fn request(&self, index: usize) -> Request {
        self.state.recorded.lock().unwrap()[index].clone()
    }
}

impl Drop for Stub {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        let workers = std::mem::take(&mut *self.state.workers.lock().unwrap());
        for w in workers {
            let _ = w.join();
        }
    }
}

/// An `http://127.0.0.1:PORT` URL where nothing listens (connection refused).
pub fn closed_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = l.local_addr().expect("local addr");
    drop(l);
    format!("http://{addr}")
}

fn accept_loop(listener: TcpListener, st: Arc<State>, tls: Option<Arc<rustls::ServerConfig>>) {
    for conn in listener.incoming() {
        if st.stop.load(Ordering::SeqCst) {
            break;
        }
        let Ok(conn) = conn else { continue };
        st.connections.fetch_add(1, Ordering::SeqCst);
        if st.open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
            continue; // dropped: closed at once
        }
        st.open.fetch_add(1, Ordering::SeqCst);
        let worker_state = st.clone();
        let tls = tls.clone();
        let h = std::thread::spawn(move || {
            let _ = conn.set_read_timeout(Some(POLL));
            let _ = conn.set_write_timeout(Some(Duration::from_secs(10)));
            let _ = conn.set_nodelay(true);
            match tls.map(rustls::ServerConnection::new) {
                None => serve(conn, &worker_state),
                Some(Ok(session)) => serve(rustls::StreamOwned::new(session, conn), &worker_state),
                Some(Err(_)) => {}
            }
            worker_state.open.fetch_sub(1, Ordering::SeqCst);
        });
        let mut workers = st.workers.lock().unwrap();
        workers.retain(|w| !w.is_finished());
        workers.push(h);
    }
}

/// A served connection: plain TCP, or TLS over it.
trait Conn: Read + Write {
    /// Ends a closing answer as its peer expects: TLS close_notify, then FIN.
    fn finish(&mut self);
}

impl Conn for TcpStream {
    fn finish(&mut self) {
        let _ = self.shutdown(Shutdown::Write);
    }
}

impl Conn for rustls::StreamOwned<rustls::ServerConnection, TcpStream> {
    fn finish(&mut self) {
        self.conn.send_close_notify();
        let _ = self.flush();
        let _ = self.sock.shutdown(Shutdown::Write);
    }
}

/// Serves one connection (its socket polls every `POLL`, so that a stop is noticed).
fn serve<S: Conn>(mut s: S, st: &State) {
    let mut buf = Vec::new();
    while let Some(req) = read_request(&mut s, &mut buf, st) {
        let close = req
            .header("connection")
            .is_some_and(|v| v.eq_ignore_ascii_case("close"));
        let index = {
            let mut recorded = st.recorded.lock().unwrap();
            if recorded.len() < MAX_RECORDED {
                recorded.push(req.clone());
            }
            *st.last.lock().unwrap() = Some(req.clone());
            st.requests.fetch_add(1, Ordering::SeqCst)
        };
        let answer = st.answer.lock().unwrap().clone();
        let reply = match answer {
            Answer::Same(reply) => reply,
            Answer::Script(script) => {
                write_scripted(&mut s, script(&req, index), st);
                return;
            }
        };
        if reply.never {
            hold(&mut s, st);
            return;
        }
        if !pause(reply.delay, st) {
            return;
        }
        let head = format!(
            "HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}\r\n",
            reply.status,
            reason(reply.status),
            reply.body.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if s.write_all(head.as_bytes()).is_err() || s.write_all(&reply.body).is_err() {
            return;
        }
        if close {
            return;
        }
    }
}

/// Writes a scripted answer; the connection closes after it.
fn write_scripted<S: Conn>(s: &mut S, reply: Reply, st: &State) {
    let _ = match reply {
        Reply::Full { status, body } => write_close(
            s,
            &format!(
                "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                reason(status),
                body.len()
            ),
            &body,
        ),
        Reply::Silent => {
            hold(s, st);
            return;
        }
        Reply::Redirect { status, location } => write_close(
            s,
            &format!(
                "HTTP/1.1 {status} {}\r\nLocation: {location}\r\nContent-Type: text/html\r\nContent-Length: 9\r\nConnection: close\r\n\r\n",
                reason(status)
            ),
            b"<a>go</a>",
        ),
        Reply::Truncated { declared, body } => write_close(
            s,
            &format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {declared}\r\nConnection: close\r\n\r\n"
            ),
            &body,
        ),
        Reply::CloseDelimited { status, body } => write_close(
            s,
            &format!("HTTP/1.1 {status} {}\r\nConnection: close\r\n\r\n", reason(status)),
            &body,
        ),
        Reply::Chunked {
            status,
            chunks,
            size,
        } => {
            let mut body = Vec::with_capacity(chunks * (size + 16) + 5);
            let piece = vec![b' '; size];
            for _ in 0..chunks {
                body.extend_from_slice(format!("{size:x}\r\n").as_bytes());
                body.extend_from_slice(&piece);
                body.extend_from_slice(b"\r\n");
            }
            body.extend_from_slice(b"0\r\n\r\n");
            write_close(
                s,
                &format!(
                    "HTTP/1.1 {status} {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
                    reason(status)
                ),
                &body,
            )
        }
    };
}

/// Writes `head` and `body`, then ends the connection.
fn write_close<S: Conn>(s: &mut S, head: &str, body: &[u8]) -> std::io::Result<()> {
    s.write_all(head.as_bytes())?;
    s.write_all(body)?;
    s.flush()?;
    s.finish();
    Ok(())
}

/// Sleeps `d` unless the stub stops first; false when it stopped.
fn pause(d: Duration, st: &State) -> bool {
    let end = Instant::now() + d;
    while Instant::now() < end {
        if st.stop.load(Ordering::SeqCst) {
            return false;
        }
        std::thread::sleep(POLL.min(end.saturating_duration_since(Instant::now())));
    }
    true
}

/// Keeps the connection open, reading and discarding, until the peer closes or the stub stops.
fn hold<S: Read>(s: &mut S, st: &State) {
    let mut sink = [0u8; 4096];
    while !st.stop.load(Ordering::SeqCst) {
        match s.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// Reads more bytes into `buf`; false on EOF, error, or stop.
fn fill<S: Read>(s: &mut S, buf: &mut Vec<u8>, st: &State) -> bool {
    let mut chunk = [0u8; 16 * 1024];
    loop {
        if st.stop.load(Ordering::SeqCst) {
            return false;
        }
        match s.read(&mut chunk) {
            Ok(0) => return false,
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                return true;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
}

fn read_request<S: Read>(s: &mut S, buf: &mut Vec<u8>, st: &State) -> Option<Request> {
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > MAX_HEAD || !fill(s, buf, st) {
            return None;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    buf.drain(..head_end + 4);
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split_whitespace();
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut req = Request {
        method,
        target,
        headers,
        body: Vec::new(),
    };
    let chunked = req
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    if chunked {
        loop {
            if let Some((body, used)) = decode_chunked(buf) {
                req.body = body;
                buf.drain(..used);
                break;
            }
            if buf.len() > MAX_BODY || !fill(s, buf, st) {
                return None;
            }
        }
    } else {
        let len: usize = req
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        if len > MAX_BODY {
            return None;
        }
        while buf.len() < len {
            if !fill(s, buf, st) {
                return None;
            }
        }
        req.body = buf.drain(..len).collect();
    }
    Some(req)
}

/// A complete chunked body at the start of `data`: (decoded body, bytes used), or None.
fn decode_chunked(data: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut i = 0;
    loop {
        let line_end = i + data.get(i..)?.windows(2).position(|w| w == b"\r\n")?;
        let size_text = std::str::from_utf8(&data[i..line_end]).ok()?;
        let size = usize::from_str_radix(size_text.split(';').next()?.trim(), 16).ok()?;
        i = line_end + 2;
        if size == 0 {
            // Optional trailers, then an empty line.
            loop {
                let end = i + data.get(i..)?.windows(2).position(|w| w == b"\r\n")?;
                let empty = end == i;
                i = end + 2;
                if empty {
                    return Some((body, i));
                }
            }
        }
        body.extend_from_slice(data.get(i..i + size)?);
        i += size + 2;
        if data.len() < i {
            return None;
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        204 => "No Content",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        422 => "Unprocessable Entity",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Status",
    }
}

/// Standard base64 (for checking basic auth headers independently of the client).
pub fn base64(input: &[u8]) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in input.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
