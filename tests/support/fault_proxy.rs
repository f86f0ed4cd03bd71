//! A TCP proxy in front of a real Prometheus whose behaviour a test switches while load runs:
//! pass through, answer slowly, answer garbage, or refuse. Every connection is judged by the
//! mode current when its bytes arrive: a mode switch closes the connections opened under another
//! mode, so a pooled keep-alive connection cannot carry a request past a fault.
//!
//! One thread accepts; two threads copy each connection. Dropping the proxy stops every thread
//! within about 50 ms and joins the acceptor.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const POLL: Duration = Duration::from_millis(50);
/// Most connections served at once; more are closed at accept.
const MAX_CONNECTIONS: usize = 512;

/// What the proxy does with a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Pass bytes both ways to the upstream (which may itself be down: then the client's
    /// connection is closed, as a dead backend behind a load balancer looks).
    None,
    /// Read the request, wait this long, then pass it through.
    Slow(Duration),
    /// Read the request, answer 200 with truncated JSON, close.
    Garbage,
    /// Close every connection as soon as it is accepted.
    Refuse,
}

struct Shared {
    fault: Mutex<Fault>,
    /// Bumped at every switch; a connection opened under an older epoch is closed.
    epoch: AtomicU64,
    stop: AtomicBool,
    open: AtomicUsize,
    upstream: SocketAddr,
}

/// The running proxy.
pub struct FaultProxy {
    /// `http://127.0.0.1:PORT` of the proxy.
    pub url: String,
    shared: Arc<Shared>,
    acceptor: Option<JoinHandle<()>>,
}

impl FaultProxy {
    /// Starts a proxy to `upstream` in mode `Fault::None`.
    pub fn start(upstream: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
        listener.set_nonblocking(true).expect("nonblocking");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let shared = Arc::new(Shared {
            fault: Mutex::new(Fault::None),
            epoch: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            open: AtomicUsize::new(0),
            upstream,
        });
        let s = shared.clone();
        let acceptor = std::thread::spawn(move || accept_loop(listener, s));
        FaultProxy {
            url,
            shared,
            acceptor: Some(acceptor),
        }
    }

    /// Switches the mode; connections opened before are closed at their next byte.
    pub fn set(&self, fault: Fault) {
        *self.shared.fault.lock().expect("fault lock") = fault;
        self.shared.epoch.fetch_add(1, Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(a) = self.acceptor.take() {
            let _ = a.join();
        }
    }
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((client, _)) => {
                if shared.open.load(Ordering::SeqCst) >= MAX_CONNECTIONS {
                    continue;
                }
                shared.open.fetch_add(1, Ordering::SeqCst);
                let s = shared.clone();
                std::thread::spawn(move || {
                    serve(client, &s);
                    s.open.fetch_sub(1, Ordering::SeqCst);
                });
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(_) => std::thread::sleep(POLL),
        }
    }
}

fn current(shared: &Shared) -> (Fault, u64) {
    let fault = *shared.fault.lock().expect("fault lock");
    (fault, shared.epoch.load(Ordering::SeqCst))
}

fn serve(client: TcpStream, shared: &Shared) {
    let (fault, epoch) = current(shared);
    let _ = client.set_nonblocking(false);
    let _ = client.set_read_timeout(Some(POLL));
    match fault {
        Fault::Refuse => {
            let _ = client.shutdown(Shutdown::Both);
        }
        Fault::Garbage => {
            if read_head(&client, shared, epoch) {
                let body = br#"{"status":"success","data":{"resultType":"vector","result":[{"metr"#;
                let mut c = &client;
                let _ = write!(
                    c,
                    "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                );
                let _ = c.write_all(body);
            }
            let _ = client.shutdown(Shutdown::Both);
        }
        Fault::Slow(delay) => {
            let Some(first) = read_some(&client, shared, epoch) else {
                return;
            };
            let until = Instant::now() + delay;
            while Instant::now() < until && still(shared, epoch) {
                std::thread::sleep(POLL.min(until.saturating_duration_since(Instant::now())));
            }
            if still(shared, epoch) {
                pipe(client, shared, epoch, first);
            }
        }
        Fault::None => pipe(client, shared, epoch, Vec::new()),
    }
}

fn still(shared: &Shared, epoch: u64) -> bool {
    !shared.stop.load(Ordering::SeqCst) && shared.epoch.load(Ordering::SeqCst) == epoch
}

/// Reads until the first bytes of a request arrive (or the mode changes).
fn read_some(client: &TcpStream, shared: &Shared, epoch: u64) -> Option<Vec<u8>> {
    let mut buf = [0u8; 16 * 1024];
    let mut c = client;
    while still(shared, epoch) {
        match c.read(&mut buf) {
            Ok(0) => return None,
            Ok(n) => return Some(buf[..n].to_vec()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return None,
        }
    }
    None
}

/// Reads a request head (up to the blank line); false when the client went away first.
fn read_head(client: &TcpStream, shared: &Shared, epoch: u64) -> bool {
    let mut seen = Vec::new();
    while seen.len() < 64 * 1024 {
        match read_some(client, shared, epoch) {
            Some(bytes) => {
                seen.extend_from_slice(&bytes);
                if seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    return true;
                }
            }
            None => return false,
        }
    }
    true
}

/// Copies both ways until either side closes or the mode changes; `first` is sent upstream
/// before anything else.
fn pipe(client: TcpStream, shared: &Shared, epoch: u64, first: Vec<u8>) {
    let Ok(mut upstream) = TcpStream::connect_timeout(&shared.upstream, Duration::from_secs(1))
    else {
        let _ = client.shutdown(Shutdown::Both);
        return;
    };
    if !first.is_empty() && upstream.write_all(&first).is_err() {
        let _ = client.shutdown(Shutdown::Both);
        return;
    }
    let _ = upstream.set_read_timeout(Some(POLL));
    let (Ok(up2), Ok(client2)) = (upstream.try_clone(), client.try_clone()) else {
        return;
    };
    std::thread::scope(|scope| {
        scope.spawn(|| copy(&client, &up2, shared, epoch));
        copy(&upstream, &client2, shared, epoch);
    });
}

fn copy(from: &TcpStream, to: &TcpStream, shared: &Shared, epoch: u64) {
    let mut buf = [0u8; 16 * 1024];
    let (mut r, mut w) = (from, to);
    loop {
        if !still(shared, epoch) {
            break;
        }
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                if w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => break,
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}
