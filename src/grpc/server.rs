//! The HTTP/2 plumbing both gRPC servers share: one connection served by hyper, requests
//! checked at the door (bearer token, message size) and then routed to the tonic services.
//!
//! hyper is driven directly rather than through tonic's transport so that the checks here
//! answer with the status codes gRPC prescribes: RESOURCE_EXHAUSTED for a message over the
//! limit (tonic's decoder says OUT_OF_RANGE), UNAUTHENTICATED for a bad token, and
//! DEADLINE_EXCEEDED from the service itself (tonic's timeout layer says CANCELLED).

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::graceful::Watcher;
use tokio::io::{AsyncRead, AsyncWrite};
use tonic::service::Routes;
use tonic::Status;
use tower::ServiceExt;

use super::remote::Authenticate;

/// Requests to these services never need a token: probes cannot send one.
const OPEN_PREFIXES: [&str; 1] = ["/grpc.health.v1.Health/"];

/// How often an idle connection is pinged, and how long the answer may take.
const KEEP_ALIVE_INTERVAL: Duration = Duration::from_secs(60);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(20);

/// What every request must pass before it reaches a service.
pub(crate) struct Gate {
    /// Checks the `authorization` header; `None` lets everyone in.
    pub auth: Option<Arc<dyn Authenticate>>,
    /// Largest message accepted, in bytes (its 5-byte frame header not counted).
    pub max_message_bytes: usize,
}

impl Gate {
    async fn handle(&self, routes: Routes, req: Request<Incoming>) -> Response<tonic::body::Body> {
        if let Some(auth) = &self.auth {
            let path = req.uri().path();
            if !OPEN_PREFIXES.iter().any(|p| path.starts_with(p)) {
                let header = req
                    .headers()
                    .get(hyper::header::AUTHORIZATION)
                    .map(|v| v.as_bytes());
                if let Err(reason) = auth.authenticate(header) {
                    tracing::debug!(path = %path, "grpc: refused, {reason}");
                    return Status::unauthenticated(reason).into_http();
                }
            }
        }
        let limit = self.max_message_bytes;
        let req = req.map(|body| {
            tonic::body::Body::new(LimitedBody {
                inner: body,
                frames: FrameLimit::new(limit),
            })
        });
        match routes.oneshot(req).await {
            Ok(response) => response,
            Err(never) => match never {},
        }
    }
}

/// Serves one connection (TLS already done, if any) until it closes, or until `watcher`'s
/// shutdown has let its requests in flight finish.
///
/// With `first_request`, a connection that brings no complete request within it is closed:
/// HTTP/2's pings keep a silent peer's connection open for over a minute otherwise.
pub(crate) async fn serve_connection<I>(
    io: I,
    routes: Routes,
    gate: Arc<Gate>,
    watcher: Watcher,
    first_request: Option<Duration>,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let requested = Arc::new(AtomicBool::new(false));
    let seen = requested.clone();
    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
        if !seen.load(Ordering::Relaxed) {
            seen.store(true, Ordering::Relaxed);
        }
        let routes = routes.clone();
        let gate = gate.clone();
        async move { Ok::<_, Infallible>(gate.handle(routes, req).await) }
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder
        .timer(TokioTimer::new())
        .keep_alive_interval(KEEP_ALIVE_INTERVAL)
        .keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    let conn = watcher.watch(builder.serve_connection(TokioIo::new(io), service));
    tokio::pin!(conn);
    let ended = match first_request {
        None => conn.await,
        Some(limit) => {
            let ended = tokio::select! {
                ended = &mut conn => Some(ended),
                () = tokio::time::sleep(limit) => None,
            };
            match ended {
                Some(ended) => ended,
                None if !requested.load(Ordering::Relaxed) => {
                    tracing::debug!("grpc: closed: no complete request in time");
                    return;
                }
                None => conn.await,
            }
        }
    };
    if let Err(e) = ended {
        tracing::debug!(error = %e, "grpc: connection ended with an error");
    }
}

/// A request body that fails with RESOURCE_EXHAUSTED as soon as a gRPC message announces a
/// length above the limit, before the message is buffered.
struct LimitedBody {
    inner: Incoming,
    frames: FrameLimit,
}

impl Body for LimitedBody {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Status>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Status::from_error(Box::new(e))))),
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    if let Err(len) = this.frames.feed(data) {
                        return Poll::Ready(Some(Err(Status::resource_exhausted(format!(
                            "request message of {len} bytes is above the limit of {} bytes",
                            this.frames.limit
                        )))));
                    }
                }
                Poll::Ready(Some(Ok(frame)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// Follows the gRPC message framing (1 flag byte, 4-byte big-endian length, the message)
/// across data chunks, to see each message's announced length.
#[derive(Debug)]
struct FrameLimit {
    limit: usize,
    header: [u8; 5],
    header_len: usize,
    body_left: u64,
}

impl FrameLimit {
    fn new(limit: usize) -> FrameLimit {
        FrameLimit {
            limit,
            header: [0; 5],
            header_len: 0,
            body_left: 0,
        }
    }

    /// Takes the next chunk of the stream; `Err(length)` once a message is too long.
    fn feed(&mut self, mut data: &[u8]) -> Result<(), u64> {
        while !data.is_empty() {
            if self.body_left > 0 {
                let n = usize::try_from(self.body_left)
                    .unwrap_or(usize::MAX)
                    .min(data.len());
                self.body_left -= n as u64;
                data = data.split_at(n).1;
                continue;
            }
            let n = (self.header.len() - self.header_len).min(data.len());
            let (head, rest) = data.split_at(n);
            for (slot, byte) in self.header.iter_mut().skip(self.header_len).zip(head) {
                *slot = *byte;
            }
            self.header_len += n;
            data = rest;
            if self.header_len == self.header.len() {
                let [_, a, b, c, d] = self.header;
                let len = u64::from(u32::from_be_bytes([a, b, c, d]));
                if len > self.limit as u64 {
                    return Err(len);
                }
                self.body_left = len;
                self.header_len = 0;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(len: u32) -> Vec<u8> {
        let mut v = vec![0u8];
        v.extend_from_slice(&len.to_be_bytes());
        v.extend(std::iter::repeat_n(7u8, len as usize));
        v
    }

    #[test]
    fn messages_up_to_the_limit_pass_in_any_chunking() {
        let mut stream = message(10);
        stream.extend(message(0));
        stream.extend(message(10));
        for chunk in [1, 2, 3, 5, 7, 64] {
            let mut f = FrameLimit::new(10);
            for c in stream.chunks(chunk) {
                assert_eq!(f.feed(c), Ok(()), "chunk size {chunk}");
            }
            assert_eq!((f.header_len, f.body_left), (0, 0));
        }
    }

    #[test]
    fn an_oversized_message_is_refused_from_its_header() {
        for chunk in [1, 2, 5, 100] {
            let mut stream = message(4);
            stream.extend_from_slice(&[0, 0, 0, 0, 11]);
            let mut f = FrameLimit::new(10);
            let result = stream.chunks(chunk).try_for_each(|c| f.feed(c));
            assert_eq!(result, Err(11), "chunk size {chunk}");
        }
        let mut f = FrameLimit::new(4 * 1024 * 1024);
        assert_eq!(
            f.feed(&[0, 0xff, 0xff, 0xff, 0xff]),
            Err(u64::from(u32::MAX))
        );
    }
}
