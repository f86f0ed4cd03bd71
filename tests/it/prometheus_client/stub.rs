//! A scriptable HTTP/1.1 stub server on 127.0.0.1 (plain or TLS) for client tests.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// One request as the stub saw it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    /// Path and query string.
    pub target: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Form fields from the body (POST) or the query string (GET).
    pub fn form(&self) -> Vec<(String, String)> {
        let raw = if self.method == "GET" {
            self.target
                .split_once('?')
                .map(|(_, q)| q.to_string())
                .unwrap_or_default()
        } else {
            String::from_utf8(self.body.clone()).unwrap()
        };
        raw.split('&')
            .filter(|kv| !kv.is_empty())
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
                (form_decode(k), form_decode(v))
            })
            .collect()
    }

    pub fn field(&self, name: &str) -> Option<String> {
        self.form()
            .into_iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v)
    }

    pub fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }
}

fn form_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// What the stub sends back.
pub enum Reply {
    /// A complete response with Content-Length.
    Full { status: u16, body: Vec<u8> },
    /// Keep the connection open and never answer (bounded: 30 s).
    Silent,
    /// Declare `declared` bytes but send only `body`, then close.
    Truncated { declared: usize, body: Vec<u8> },
    /// Send a head without Content-Length, then `body`, then close (close-delimited).
    CloseDelimited { status: u16, body: Vec<u8> },
    /// Chunked encoding, `chunks` pieces of `size` bytes each.
    Chunked {
        status: u16,
        chunks: usize,
        size: usize,
    },
}

pub fn json(status: u16, body: &str) -> Reply {
    Reply::Full {
        status,
        body: body.as_bytes().to_vec(),
    }
}

pub fn vector_body(value: &str) -> String {
    format!(
        r#"{{"status":"success","data":{{"resultType":"vector","result":[{{"metric":{{"job":"api"}},"value":[1712345678.5,"{value}"]}}]}}}}"#
    )
}

type Handler = Arc<dyn Fn(&Request, usize) -> Reply + Send + Sync>;

/// A running stub; it stops when the test's runtime shuts down.
pub struct Stub {
    pub addr: SocketAddr,
    pub requests: Arc<Mutex<Vec<Request>>>,
}

impl Stub {
    pub async fn start(handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static) -> Stub {
        Stub::serve(Arc::new(handler), None).await
    }

    pub async fn start_tls(
        acceptor: TlsAcceptor,
        handler: impl Fn(&Request, usize) -> Reply + Send + Sync + 'static,
    ) -> Stub {
        Stub::serve(Arc::new(handler), Some(acceptor)).await
    }

    async fn serve(handler: Handler, tls: Option<TlsAcceptor>) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            // Bounded: no test needs more connections than this.
            for _ in 0..1000 {
                let Ok((tcp, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let seen = seen.clone();
                let tls = tls.clone();
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(tcp).await {
                                serve_one(stream, handler, seen).await;
                            }
                        }
                        None => serve_one(tcp, handler, seen).await,
                    }
                });
            }
        });
        Stub { addr, requests }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn count(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn request(&self, i: usize) -> Request {
        self.requests.lock().unwrap()[i].clone()
    }
}

async fn serve_one<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    handler: Handler,
    seen: Arc<Mutex<Vec<Request>>>,
) {
    let Some(req) = read_request(&mut stream).await else {
        return;
    };
    let index = {
        let mut seen = seen.lock().unwrap();
        seen.push(req.clone());
        seen.len() - 1
    };
    let reply = handler(&req, index);
    let _ = write_reply(&mut stream, reply).await;
}

async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Option<Request> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 64 * 1024 {
            return None;
        }
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).ok()?;
    let mut lines = head.split("\r\n");
    let mut first = lines.next()?.split(' ');
    let method = first.next()?.to_string();
    let target = first.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some(Request {
        method,
        target,
        headers,
        body,
    })
}

async fn write_reply<S: AsyncWrite + Unpin>(stream: &mut S, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Full { status, body } => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Reply::Silent => tokio::time::sleep(Duration::from_secs(30)).await,
        Reply::Truncated { declared, body } => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {declared}\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Reply::CloseDelimited { status, body } => {
            let head = format!("HTTP/1.1 {status} X\r\nconnection: close\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(&body).await?;
        }
        Reply::Chunked {
            status,
            chunks,
            size,
        } => {
            let head = format!(
                "HTTP/1.1 {status} X\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            let piece = vec![b' '; size];
            for _ in 0..chunks {
                stream.write_all(format!("{size:x}\r\n").as_bytes()).await?;
                stream.write_all(&piece).await?;
                stream.write_all(b"\r\n").await?;
            }
            stream.write_all(b"0\r\n\r\n").await?;
        }
    }
    stream.flush().await?;
    stream.shutdown().await
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
