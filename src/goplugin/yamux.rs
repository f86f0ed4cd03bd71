//! hashicorp/yamux, server side: the stream multiplexer go-plugin runs over the plugin's
//! socket. The host is the client and opens every stream; rollgate accepts them.
//!
//! Frames are a 12-byte header (version 0, type, flags, stream id, length; big-endian) and,
//! for data frames, `length` bytes. Each stream has a 256 KiB window in each direction: data
//! sent must fit the peer's window, which grows back by window updates as the peer consumes.
//! A frame that breaks the protocol ends the session with a go-away, never a panic.

use std::collections::{HashMap, VecDeque};
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot, watch, Notify};
use tokio::task::JoinHandle;

/// Every stream's window when it opens (and the most it grows back to).
pub(crate) const INITIAL_WINDOW: u32 = 256 * 1024;
pub(crate) const HEADER_SIZE: usize = 12;
const VERSION: u8 = 0;

const TYPE_DATA: u8 = 0;
const TYPE_WINDOW_UPDATE: u8 = 1;
const TYPE_PING: u8 = 2;
const TYPE_GO_AWAY: u8 = 3;

const FLAG_SYN: u16 = 1;
const FLAG_ACK: u16 = 2;
const FLAG_FIN: u16 = 4;
const FLAG_RST: u16 = 8;

const GO_AWAY_NORMAL: u32 = 0;
const GO_AWAY_PROTOCOL: u32 = 1;

/// Streams accepted but not yet taken by [`Session::accept`] (yamux's AcceptBacklog).
const ACCEPT_BACKLOG: usize = 256;
/// Most streams open at once; more are reset.
const MAX_STREAMS: usize = 1024;
/// Largest data frame rollgate sends.
const MAX_FRAME: usize = 64 * 1024;
/// The writer coalesces queued frames up to this many bytes per socket write.
const WRITE_BATCH: usize = 256 * 1024;

/// Why a session or stream operation failed.
#[derive(Debug, thiserror::Error)]
pub enum YamuxError {
    /// The connection failed.
    #[error("yamux: i/o: {0}")]
    Io(#[from] io::Error),
    /// The peer broke the framing rules.
    #[error("yamux: protocol error: {0}")]
    Protocol(&'static str),
    /// The session has ended.
    #[error("yamux: session closed")]
    SessionClosed,
    /// The stream was reset.
    #[error("yamux: stream reset")]
    StreamReset,
    /// The stream was already half-closed by rollgate.
    #[error("yamux: stream closed for writing")]
    StreamClosed,
}

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Header {
    pub(crate) ty: u8,
    pub(crate) flags: u16,
    pub(crate) stream: u32,
    pub(crate) length: u32,
}

impl Header {
    pub(crate) fn encode(self) -> [u8; HEADER_SIZE] {
        let mut h = [0u8; HEADER_SIZE];
        h[0] = VERSION;
        h[1] = self.ty;
        h[2..4].copy_from_slice(&self.flags.to_be_bytes());
        h[4..8].copy_from_slice(&self.stream.to_be_bytes());
        h[8..12].copy_from_slice(&self.length.to_be_bytes());
        h
    }

    pub(crate) fn parse(h: &[u8; HEADER_SIZE]) -> Result<Self, YamuxError> {
        if h[0] != VERSION {
            return Err(YamuxError::Protocol("invalid protocol version"));
        }
        if h[1] > TYPE_GO_AWAY {
            return Err(YamuxError::Protocol("invalid frame type"));
        }
        Ok(Header {
            ty: h[1],
            flags: u16::from_be_bytes([h[2], h[3]]),
            stream: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
            length: u32::from_be_bytes([h[8], h[9], h[10], h[11]]),
        })
    }
}

fn frame(ty: u8, flags: u16, stream: u32, length: u32) -> Vec<u8> {
    Header {
        ty,
        flags,
        stream,
        length,
    }
    .encode()
    .to_vec()
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// What the writer task is asked to do, in order.
enum Out {
    Frame(Vec<u8>),
    /// Answer once every earlier frame has been written.
    Flush(oneshot::Sender<()>),
    /// Write what is queued, then shut the socket's write side.
    Close,
}

#[derive(Debug, Default)]
struct StreamState {
    recv: VecDeque<Bytes>,
    buffered: u32,
    recv_window: u32,
    send_window: u32,
    remote_fin: bool,
    local_fin: bool,
    /// Reset by either side, or the session ended.
    reset: bool,
}

#[derive(Debug)]
struct StreamShared {
    id: u32,
    state: Mutex<StreamState>,
    readable: Notify,
    writable: Notify,
}

/// State shared by the session's tasks and its streams.
struct Shared {
    streams: Mutex<HashMap<u32, Arc<StreamShared>>>,
    out: mpsc::UnboundedSender<Out>,
    closed: AtomicBool,
    closed_tx: watch::Sender<bool>,
}

impl Shared {
    fn send(&self, frame: Vec<u8>) -> Result<(), YamuxError> {
        if self.closed.load(Ordering::Acquire) {
            return Err(YamuxError::SessionClosed);
        }
        self.out
            .send(Out::Frame(frame))
            .map_err(|_| YamuxError::SessionClosed)
    }

    /// Ends the session: every stream is reset locally, the writer drains and shuts down.
    fn close(&self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let streams: Vec<_> = lock(&self.streams).drain().map(|(_, s)| s).collect();
        for s in streams {
            lock(&s.state).reset = true;
            s.readable.notify_one();
            s.writable.notify_one();
        }
        let _ = self.out.send(Out::Close);
        self.closed_tx.send_replace(true);
    }

    fn remove(&self, id: u32) {
        lock(&self.streams).remove(&id);
    }
}

/// One yamux session over a connection, as the server.
pub(crate) struct Session {
    shared: Arc<Shared>,
    accept: mpsc::Receiver<Stream>,
    reader: JoinHandle<()>,
    closed_rx: watch::Receiver<bool>,
}

impl Session {
    /// Starts serving `io` (spawns a reader and a writer task).
    pub(crate) fn server<T>(io: T) -> Session
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let (r, w) = tokio::io::split(io);
        let (out_tx, out_rx) = mpsc::unbounded_channel();
        let (accept_tx, accept_rx) = mpsc::channel(ACCEPT_BACKLOG);
        let (closed_tx, closed_rx) = watch::channel(false);
        let shared = Arc::new(Shared {
            streams: Mutex::new(HashMap::new()),
            out: out_tx,
            closed: AtomicBool::new(false),
            closed_tx,
        });
        tokio::spawn(write_loop(w, out_rx, shared.clone()));
        let reader = tokio::spawn(read_loop(r, shared.clone(), accept_tx));
        Session {
            shared,
            accept: accept_rx,
            reader,
            closed_rx,
        }
    }

    /// The next stream the client opened; `None` once the session has ended.
    pub(crate) async fn accept(&mut self) -> Option<Stream> {
        tokio::select! {
            s = self.accept.recv() => s,
            _ = wait_closed(self.closed_rx.clone()) => None,
        }
    }

    /// A handle for flushing and closing the session from elsewhere.
    pub(crate) fn handle(&self) -> SessionHandle {
        SessionHandle {
            shared: self.shared.clone(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shared.close();
        self.reader.abort();
    }
}

async fn wait_closed(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|c| *c).await;
}

/// Flushes a session without owning it.
#[derive(Clone)]
pub(crate) struct SessionHandle {
    shared: Arc<Shared>,
}

impl SessionHandle {
    /// Waits until every frame queued so far has been written to the socket.
    pub(crate) async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.shared.out.send(Out::Flush(tx)).is_ok() {
            let _ = rx.await;
        }
    }
}

/// One multiplexed stream. Cloning gives another handle to the same stream; reads are meant
/// for one task, writes for one task at a time.
#[derive(Clone)]
pub(crate) struct Stream {
    s: Arc<StreamShared>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream").field("id", &self.s.id).finish()
    }
}

impl Stream {
    /// The stream id (odd: the client opened it).
    pub(crate) fn id(&self) -> u32 {
        self.s.id
    }

    /// The next chunk of data; `None` at end of stream (FIN, reset, or session end).
    pub(crate) async fn read(&self) -> Option<Bytes> {
        loop {
            {
                let mut st = lock(&self.s.state);
                if let Some(chunk) = st.recv.pop_front() {
                    st.buffered = st
                        .buffered
                        .saturating_sub(u32::try_from(chunk.len()).unwrap_or(u32::MAX));
                    // Grow the peer's window back once half of it has been consumed.
                    let delta = INITIAL_WINDOW
                        .saturating_sub(st.buffered)
                        .saturating_sub(st.recv_window);
                    if delta >= INITIAL_WINDOW / 2 {
                        st.recv_window += delta;
                        let _ = self
                            .shared
                            .send(frame(TYPE_WINDOW_UPDATE, 0, self.s.id, delta));
                    }
                    return Some(chunk);
                }
                if st.remote_fin || st.reset {
                    return None;
                }
            }
            self.s.readable.notified().await;
        }
    }

    /// Sends all of `data`, waiting for the peer's window as needed.
    pub(crate) async fn write_all(&self, mut data: &[u8]) -> Result<(), YamuxError> {
        while !data.is_empty() {
            let n = {
                let mut st = lock(&self.s.state);
                if st.reset {
                    return Err(YamuxError::StreamReset);
                }
                if st.local_fin {
                    return Err(YamuxError::StreamClosed);
                }
                let n = (st.send_window as usize).min(data.len()).min(MAX_FRAME);
                // At most the send window, a u32.
                #[allow(clippy::cast_possible_truncation)]
                let n32 = n as u32;
                st.send_window -= n32;
                (n, n32)
            };
            let (n, n32) = n;
            if n == 0 {
                self.s.writable.notified().await;
                continue;
            }
            let (now, rest) = data.split_at(n);
            let mut f = frame(TYPE_DATA, 0, self.s.id, n32);
            f.extend_from_slice(now);
            self.shared.send(f)?;
            data = rest;
        }
        Ok(())
    }

    /// Half-closes the stream (FIN): nothing more will be written.
    pub(crate) fn close(&self) {
        let mut st = lock(&self.s.state);
        if st.local_fin || st.reset {
            return;
        }
        st.local_fin = true;
        let _ = self
            .shared
            .send(frame(TYPE_WINDOW_UPDATE, FLAG_FIN, self.s.id, 0));
        if st.remote_fin {
            drop(st);
            self.shared.remove(self.s.id);
        }
    }

    /// Aborts the stream in both directions (RST).
    pub(crate) fn reset(&self) {
        let mut st = lock(&self.s.state);
        if st.reset {
            return;
        }
        st.reset = true;
        drop(st);
        let _ = self
            .shared
            .send(frame(TYPE_WINDOW_UPDATE, FLAG_RST, self.s.id, 0));
        self.shared.remove(self.s.id);
        self.s.readable.notify_one();
        self.s.writable.notify_one();
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::UnboundedReceiver<Out>,
    shared: Arc<Shared>,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(WRITE_BATCH);
    let mut flushes = Vec::new();
    let mut closing = false;
    while let Some(first) = rx.recv().await {
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Out::Frame(f) => buf.extend_from_slice(&f),
                Out::Flush(tx) => flushes.push(tx),
                Out::Close => closing = true,
            }
            if buf.len() < WRITE_BATCH && !closing {
                next = rx.try_recv().ok();
            }
        }
        if !buf.is_empty() {
            if let Err(e) = w.write_all(&buf).await {
                tracing::debug!(error = %e, "yamux: write failed");
                break;
            }
            buf.clear();
        }
        for tx in flushes.drain(..) {
            let _ = tx.send(());
        }
        if closing {
            break;
        }
    }
    let _ = w.shutdown().await;
    shared.close();
}

/// Reads exactly `buf.len()` bytes; `Ok(false)` on end of file before the first byte.
async fn read_frame_start<R: AsyncRead + Unpin>(
    r: &mut R,
    buf: &mut [u8],
) -> Result<bool, YamuxError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read(&mut buf[got..]).await?;
        if n == 0 {
            if got == 0 {
                return Ok(false);
            }
            return Err(YamuxError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        got += n;
    }
    Ok(true)
}

async fn read_loop<R: AsyncRead + Unpin>(
    mut r: R,
    shared: Arc<Shared>,
    accept: mpsc::Sender<Stream>,
) {
    match recv_frames(&mut r, &shared, &accept).await {
        Ok(()) => {}
        Err(YamuxError::Protocol(why)) => {
            tracing::warn!(reason = why, "yamux: protocol error, closing the session");
            let _ = shared.send(frame(TYPE_GO_AWAY, 0, 0, GO_AWAY_PROTOCOL));
        }
        Err(e) => tracing::debug!(error = %e, "yamux: session ended"),
    }
    shared.close();
}

async fn recv_frames<R: AsyncRead + Unpin>(
    r: &mut R,
    shared: &Arc<Shared>,
    accept: &mpsc::Sender<Stream>,
) -> Result<(), YamuxError> {
    let mut hdr = [0u8; HEADER_SIZE];
    loop {
        if !read_frame_start(r, &mut hdr).await? {
            return Ok(());
        }
        let h = Header::parse(&hdr)?;
        match h.ty {
            TYPE_DATA | TYPE_WINDOW_UPDATE => stream_frame(r, shared, accept, h).await?,
            TYPE_PING => {
                if h.flags & FLAG_SYN != 0 {
                    shared.send(frame(TYPE_PING, FLAG_ACK, 0, h.length))?;
                }
            }
            _ => {
                // Go-away: the client opens no more streams; the session ends when it
                // closes the connection.
                if h.length != GO_AWAY_NORMAL {
                    tracing::debug!(code = h.length, "yamux: client sent go-away");
                }
            }
        }
    }
}

async fn stream_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    shared: &Arc<Shared>,
    accept: &mpsc::Sender<Stream>,
    h: Header,
) -> Result<(), YamuxError> {
    if h.flags & FLAG_SYN != 0 {
        incoming_stream(shared, accept, h.stream)?;
    }
    let stream = lock(&shared.streams).get(&h.stream).cloned();
    let Some(s) = stream else {
        // A frame for a stream that is gone (or was refused): drop its data.
        if h.ty == TYPE_DATA {
            if h.length > INITIAL_WINDOW {
                return Err(YamuxError::Protocol("receive window exceeded"));
            }
            discard(r, h.length).await?;
        }
        return Ok(());
    };
    if h.ty == TYPE_WINDOW_UPDATE && h.length > 0 {
        let mut st = lock(&s.state);
        st.send_window = st.send_window.saturating_add(h.length);
        drop(st);
        s.writable.notify_one();
    }
    if h.ty == TYPE_DATA && h.length > 0 {
        let window = lock(&s.state).recv_window;
        if h.length > window {
            return Err(YamuxError::Protocol("receive window exceeded"));
        }
        // Only this task shrinks the window, so the check holds while the body is read.
        let mut body = vec![0u8; h.length as usize];
        r.read_exact(&mut body).await?;
        let mut st = lock(&s.state);
        st.recv_window -= h.length;
        if !st.reset && !st.remote_fin {
            st.buffered += h.length;
            st.recv.push_back(Bytes::from(body));
            drop(st);
            s.readable.notify_one();
        }
    }
    if h.flags & FLAG_FIN != 0 {
        let mut st = lock(&s.state);
        st.remote_fin = true;
        let done = st.local_fin;
        drop(st);
        s.readable.notify_one();
        if done {
            shared.remove(h.stream);
        }
    }
    if h.flags & FLAG_RST != 0 {
        lock(&s.state).reset = true;
        shared.remove(h.stream);
        s.readable.notify_one();
        s.writable.notify_one();
    }
    Ok(())
}

fn incoming_stream(
    shared: &Arc<Shared>,
    accept: &mpsc::Sender<Stream>,
    id: u32,
) -> Result<(), YamuxError> {
    if id.is_multiple_of(2) {
        return Err(YamuxError::Protocol("client opened an even stream id"));
    }
    let mut streams = lock(&shared.streams);
    if streams.contains_key(&id) {
        return Err(YamuxError::Protocol("duplicate stream declared"));
    }
    if streams.len() >= MAX_STREAMS {
        drop(streams);
        return shared.send(frame(TYPE_WINDOW_UPDATE, FLAG_RST, id, 0));
    }
    let s = Arc::new(StreamShared {
        id,
        state: Mutex::new(StreamState {
            recv_window: INITIAL_WINDOW,
            send_window: INITIAL_WINDOW,
            ..StreamState::default()
        }),
        readable: Notify::new(),
        writable: Notify::new(),
    });
    let stream = Stream {
        s: s.clone(),
        shared: shared.clone(),
    };
    if accept.try_send(stream).is_err() {
        drop(streams);
        tracing::warn!("yamux: accept backlog exceeded, resetting stream");
        return shared.send(frame(TYPE_WINDOW_UPDATE, FLAG_RST, id, 0));
    }
    streams.insert(id, s);
    drop(streams);
    shared.send(frame(TYPE_WINDOW_UPDATE, FLAG_ACK, id, 0))
}

async fn discard<R: AsyncRead + Unpin>(r: &mut R, mut n: u32) -> Result<(), YamuxError> {
    const SCRATCH: u32 = 4096;
    let mut scratch = [0u8; SCRATCH as usize];
    while n > 0 {
        let want = n.min(SCRATCH);
        r.read_exact(&mut scratch[..want as usize]).await?;
        n -= want;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::DuplexStream;

    fn hdr(ty: u8, flags: u16, stream: u32, length: u32) -> [u8; 12] {
        Header {
            ty,
            flags,
            stream,
            length,
        }
        .encode()
    }

    async fn read_header(c: &mut DuplexStream) -> Header {
        let mut h = [0u8; 12];
        tokio::time::timeout(Duration::from_secs(5), c.read_exact(&mut h))
            .await
            .unwrap()
            .unwrap();
        Header::parse(&h).unwrap()
    }

    fn pair() -> (Session, DuplexStream) {
        let (a, b) = tokio::io::duplex(1 << 20);
        (Session::server(a), b)
    }

    #[tokio::test]
    async fn accepts_acks_and_echoes_data() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        let s = sess.accept().await.unwrap();
        assert_eq!(s.id(), 1);
        let ack = read_header(&mut c).await;
        assert_eq!(
            (ack.ty, ack.flags, ack.stream),
            (TYPE_WINDOW_UPDATE, FLAG_ACK, 1)
        );
        c.write_all(&hdr(TYPE_DATA, 0, 1, 5)).await.unwrap();
        c.write_all(b"hello").await.unwrap();
        assert_eq!(&s.read().await.unwrap()[..], b"hello");
        s.write_all(b"world").await.unwrap();
        let h = read_header(&mut c).await;
        assert_eq!((h.ty, h.stream, h.length), (TYPE_DATA, 1, 5));
        let mut body = [0u8; 5];
        c.read_exact(&mut body).await.unwrap();
        assert_eq!(&body, b"world");
        // FIN from the client ends reads.
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_FIN, 1, 0))
            .await
            .unwrap();
        assert!(s.read().await.is_none());
    }

    #[tokio::test]
    async fn pings_are_answered() {
        let (_sess, mut c) = pair();
        c.write_all(&hdr(TYPE_PING, FLAG_SYN, 0, 0xABCD))
            .await
            .unwrap();
        let h = read_header(&mut c).await;
        assert_eq!((h.ty, h.flags, h.length), (TYPE_PING, FLAG_ACK, 0xABCD));
    }

    #[tokio::test]
    async fn big_writes_respect_the_window() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        let s = sess.accept().await.unwrap();
        read_header(&mut c).await; // ACK
        let data = vec![7u8; INITIAL_WINDOW as usize + 1000];
        let writer = tokio::spawn(async move { s.write_all(&data).await.map(|_| s) });
        let mut got = 0usize;
        while got < INITIAL_WINDOW as usize {
            let h = read_header(&mut c).await;
            assert_eq!(h.ty, TYPE_DATA);
            let mut body = vec![0u8; h.length as usize];
            c.read_exact(&mut body).await.unwrap();
            got += body.len();
        }
        assert_eq!(got, INITIAL_WINDOW as usize);
        // Nothing more until the client opens its window.
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!writer.is_finished());
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, 0, 1, 4096))
            .await
            .unwrap();
        let h = read_header(&mut c).await;
        assert_eq!(h.length, 1000);
        let mut rest = vec![0u8; 1000];
        c.read_exact(&mut rest).await.unwrap();
        writer.await.unwrap().unwrap();
    }

    #[tokio::test]
    async fn consuming_data_sends_window_updates() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        let s = sess.accept().await.unwrap();
        read_header(&mut c).await;
        let chunk = vec![1u8; 100 * 1024];
        for _ in 0..2 {
            c.write_all(&hdr(TYPE_DATA, 0, 1, chunk.len() as u32))
                .await
                .unwrap();
            c.write_all(&chunk).await.unwrap();
        }
        s.read().await.unwrap();
        s.read().await.unwrap();
        let h = read_header(&mut c).await;
        assert_eq!((h.ty, h.stream), (TYPE_WINDOW_UPDATE, 1));
        assert_eq!(h.length, 200 * 1024);
    }

    #[tokio::test]
    async fn overrunning_the_window_is_a_protocol_error() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        let s = sess.accept().await.unwrap();
        read_header(&mut c).await;
        c.write_all(&hdr(TYPE_DATA, 0, 1, INITIAL_WINDOW + 1))
            .await
            .unwrap();
        let h = read_header(&mut c).await;
        assert_eq!((h.ty, h.length), (TYPE_GO_AWAY, GO_AWAY_PROTOCOL));
        assert!(s.read().await.is_none());
        assert!(sess.accept().await.is_none());
    }

    #[tokio::test]
    async fn garbage_ends_the_session_with_go_away() {
        for garbage in [[9u8; 12], hdr(7, 0, 1, 0), hdr(TYPE_DATA, FLAG_SYN, 2, 0)] {
            let (mut sess, mut c) = pair();
            c.write_all(&garbage).await.unwrap();
            let h = read_header(&mut c).await;
            assert_eq!((h.ty, h.length), (TYPE_GO_AWAY, GO_AWAY_PROTOCOL));
            assert!(sess.accept().await.is_none());
        }
    }

    #[tokio::test]
    async fn duplicate_stream_is_a_protocol_error_and_rst_ends_a_stream() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 3, 0))
            .await
            .unwrap();
        let s1 = sess.accept().await.unwrap();
        let _s3 = sess.accept().await.unwrap();
        read_header(&mut c).await;
        read_header(&mut c).await;
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_RST, 1, 0))
            .await
            .unwrap();
        assert!(s1.read().await.is_none());
        assert!(matches!(
            s1.write_all(b"x").await,
            Err(YamuxError::StreamReset)
        ));
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 3, 0))
            .await
            .unwrap();
        let h = read_header(&mut c).await;
        assert_eq!((h.ty, h.length), (TYPE_GO_AWAY, GO_AWAY_PROTOCOL));
    }

    #[tokio::test]
    async fn data_for_unknown_streams_is_discarded() {
        let (mut sess, mut c) = pair();
        c.write_all(&hdr(TYPE_DATA, 0, 9, 3)).await.unwrap();
        c.write_all(b"abc").await.unwrap();
        c.write_all(&hdr(TYPE_WINDOW_UPDATE, FLAG_SYN, 1, 0))
            .await
            .unwrap();
        c.write_all(&hdr(TYPE_DATA, 0, 1, 2)).await.unwrap();
        c.write_all(b"ok").await.unwrap();
        let s = sess.accept().await.unwrap();
        assert_eq!(&s.read().await.unwrap()[..], b"ok");
    }

    #[tokio::test]
    async fn client_eof_ends_the_session() {
        let (mut sess, c) = pair();
        drop(c);
        assert!(sess.accept().await.is_none());
        wait_closed(sess.closed_rx.clone()).await;
    }

    fn frames() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        proptest::collection::vec((0u8..5, 0u16..16, 0u32..8, 0u32..400, any::<bool>()), 0..24)
            .prop_map(|fs| {
                let mut out = Vec::new();
                for (ty, flags, stream, len, bad_version) in fs {
                    let mut h = hdr(ty, flags, stream, len);
                    if bad_version {
                        h[0] = 1;
                    }
                    out.extend_from_slice(&h);
                    if ty == TYPE_DATA {
                        out.extend(std::iter::repeat_n(0x5A, len.min(300) as usize));
                    }
                }
                out
            })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        /// Any sequence of frames, valid or not, ends in Ok or an error, never a panic.
        #[test]
        fn random_frames_never_panic(bytes in frames()) {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async {
                let (out, _out_rx) = mpsc::unbounded_channel();
                let (accept_tx, _accept_rx) = mpsc::channel(ACCEPT_BACKLOG);
                let (closed_tx, _closed_rx) = watch::channel(false);
                let shared = Arc::new(Shared {
                    streams: Mutex::new(HashMap::new()),
                    out,
                    closed: AtomicBool::new(false),
                    closed_tx,
                });
                let mut r = &bytes[..];
                let _ = recv_frames(&mut r, &shared, &accept_tx).await;
            });
        }
    }
}
