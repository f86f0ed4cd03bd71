//! `serve`'s log writer: a request's worker appends its line to one shared buffer, and a thread
//! of its own writes the buffer out when [`Pacing::write_at`] bytes have gathered, or
//! [`Pacing::every`] after the first line waiting, whichever comes first.
//!
//! Hand-written, replacing tracing-appender's non-blocking writer: there each line was an
//! allocation sent through a channel, and the writer thread woke for every few lines, spun in
//! the channel's backoff (`sched_yield`) and wrote to the pipe whenever its queue ran empty. On
//! two saturated cores that cost 10-15 % of serve's throughput (docs/serve.md, "Counted, not
//! timed"). Here a line costs a copy under a mutex that is rarely contended, and a busy server
//! writes a buffer at a time.

use std::io::{self, Write};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// When buffered lines are written out, and how much may wait.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Pacing {
    /// Buffered bytes that are written out at once, without waiting for the timer.
    pub write_at: usize,
    /// The longest a line waits while the output keeps up.
    pub every: Duration,
    /// Buffered bytes at which writers wait for the thread: a stuck stderr (a full pipe that
    /// nobody reads) slows requests down instead of growing memory without bound, and no line
    /// is dropped.
    pub max_pending: usize,
}

impl Default for Pacing {
    fn default() -> Pacing {
        Pacing {
            write_at: 64 * 1024,
            every: Duration::from_millis(10),
            max_pending: 8 * 1024 * 1024,
        }
    }
}

/// How long dropping the [`Guard`] waits for the buffered lines to be written.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(1);

struct Shared {
    pacing: Pacing,
    pending: Mutex<Pending>,
    /// Wakes the thread: the first line into an empty buffer, `write_at` reached, closing.
    work: Condvar,
    /// Wakes writers waiting at `max_pending`: the thread took the buffer, or closing.
    drained: Condvar,
}

#[derive(Default)]
struct Pending {
    bytes: Vec<u8>,
    closed: bool,
}

/// The writer handed to tracing-subscriber (`with_writer`): every event's line goes into the
/// shared buffer with one `write_all`.
#[derive(Clone)]
pub(crate) struct Writer(Arc<Shared>);

/// Owns the writing thread: dropping it writes out what is buffered (waiting up to a second)
/// and ends the thread; lines logged after that are dropped.
pub(crate) struct Guard {
    shared: Arc<Shared>,
    done: mpsc::Receiver<()>,
}

/// Starts the thread that writes to `out`.
pub(crate) fn start<W: Write + Send + 'static>(
    out: W,
    pacing: Pacing,
) -> io::Result<(Writer, Guard)> {
    let shared = Arc::new(Shared {
        pacing,
        pending: Mutex::new(Pending::default()),
        work: Condvar::new(),
        drained: Condvar::new(),
    });
    let (finished, done) = mpsc::channel();
    let thread_shared = shared.clone();
    std::thread::Builder::new()
        .name("rollgate-log".into())
        .spawn(move || {
            write_out(&thread_shared, out);
            let _ = finished.send(());
        })?;
    Ok((Writer(shared.clone()), Guard { shared, done }))
}

/// The thread: waits for lines, lets them gather, writes them out; until closed and empty.
fn write_out<W: Write>(shared: &Shared, mut out: W) {
    let pacing = shared.pacing;
    let mut batch = Vec::with_capacity(pacing.write_at);
    loop {
        let mut pending = lock(&shared.pending);
        while pending.bytes.is_empty() && !pending.closed {
            pending = shared
                .work
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if pending.bytes.is_empty() {
            return;
        }
        if !pending.closed && pending.bytes.len() < pacing.write_at {
            pending = shared
                .work
                .wait_timeout_while(pending, pacing.every, |p| {
                    p.bytes.len() < pacing.write_at && !p.closed
                })
                .map_or_else(|p| p.into_inner().0, |(p, _)| p);
        }
        std::mem::swap(&mut pending.bytes, &mut batch);
        drop(pending);
        shared.drained.notify_all();
        // Nothing to tell anyone about a failed write to stderr.
        let _ = out.write_all(&batch).and_then(|()| out.flush());
        batch.clear();
    }
}

fn lock(m: &Mutex<Pending>) -> MutexGuard<'_, Pending> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Write for &Writer {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.write_all(bytes)?;
        Ok(bytes.len())
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let shared = &*self.0;
        let mut pending = lock(&shared.pending);
        while pending.bytes.len() >= shared.pacing.max_pending && !pending.closed {
            pending = shared
                .drained
                .wait(pending)
                .unwrap_or_else(PoisonError::into_inner);
        }
        if pending.closed {
            return Ok(());
        }
        let before = pending.bytes.len();
        pending.bytes.extend_from_slice(bytes);
        let after = pending.bytes.len();
        drop(pending);
        // The thread waits without a timeout on an empty buffer, and with one until `write_at`.
        let write_at = shared.pacing.write_at;
        if before == 0 || (before < write_at && after >= write_at) {
            shared.work.notify_one();
        }
        Ok(())
    }

    /// Left to the thread.
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Writer {
    type Writer = &'a Writer;

    fn make_writer(&'a self) -> &'a Writer {
        self
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        lock(&self.shared.pending).closed = true;
        self.shared.work.notify_one();
        self.shared.drained.notify_all();
        let _ = self.done.recv_timeout(DRAIN_TIMEOUT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Instant;

    /// An output that keeps what it is given and counts the writes.
    #[derive(Clone, Default)]
    struct Sink {
        bytes: Arc<Mutex<Vec<u8>>>,
        writes: Arc<AtomicUsize>,
        /// While held by the test, writes wait (a pipe nobody reads).
        gate: Arc<Mutex<()>>,
    }

    impl Write for Sink {
        fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
            let _open = self.gate.lock().unwrap();
            self.writes.fetch_add(1, Ordering::SeqCst);
            self.bytes.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn line(thread: usize, n: usize) -> String {
        format!(
            "{{\"thread\":{thread},\"n\":{n},\"padding\":\"{}\"}}\n",
            "x".repeat(150)
        )
    }

    #[test]
    fn every_line_arrives_whole_in_order_and_a_buffer_at_a_time() {
        let sink = Sink::default();
        let (writer, guard) = start(sink.clone(), Pacing::default()).unwrap();
        let (threads, lines) = (4, 5_000);
        std::thread::scope(|s| {
            for t in 0..threads {
                let writer = writer.clone();
                s.spawn(move || {
                    for n in 0..lines {
                        (&writer).write_all(line(t, n).as_bytes()).unwrap();
                    }
                });
            }
        });
        drop(guard);
        let out = String::from_utf8(sink.bytes.lock().unwrap().clone()).unwrap();
        let mut next = vec![0; threads];
        for l in out.lines() {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let t = v["thread"].as_u64().unwrap() as usize;
            assert_eq!(v["n"].as_u64().unwrap() as usize, next[t], "thread {t}");
            next[t] += 1;
        }
        assert_eq!(next, vec![lines; threads]);
        // 3.3 MB of lines: one write per 64 KiB, plus the timer's partial buffers.
        let writes = sink.writes.load(Ordering::SeqCst);
        assert!(
            writes < 1_000,
            "{writes} writes for {} lines",
            threads * lines
        );
    }

    #[test]
    fn a_lone_line_is_written_without_waiting_for_more() {
        let sink = Sink::default();
        let (writer, _guard) = start(sink.clone(), Pacing::default()).unwrap();
        (&writer).write_all(b"quiet\n").unwrap();
        let started = Instant::now();
        while sink.bytes.lock().unwrap().is_empty() {
            assert!(started.elapsed() < Duration::from_secs(5), "never written");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(&*sink.bytes.lock().unwrap(), b"quiet\n");
    }

    #[test]
    fn a_stuck_output_holds_writers_back_instead_of_growing_or_dropping() {
        let sink = Sink::default();
        let pacing = Pacing {
            write_at: 64,
            every: Duration::from_millis(1),
            max_pending: 1_000,
        };
        let (writer, guard) = start(sink.clone(), pacing).unwrap();
        let stuck = sink.gate.lock().unwrap();
        let written = Arc::new(AtomicUsize::new(0));
        let producer = {
            let (writer, written) = (writer.clone(), written.clone());
            std::thread::spawn(move || {
                for n in 0..1_000 {
                    (&writer).write_all(line(0, n).as_bytes()).unwrap();
                    written.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        // One batch is with the stuck output, at most `max_pending` bytes (plus a line) wait.
        let held = written.load(Ordering::SeqCst);
        assert!(
            held < 20,
            "{held} lines accepted while the output was stuck"
        );
        drop(stuck);
        producer.join().unwrap();
        drop(guard);
        let out = sink.bytes.lock().unwrap();
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1_000);
    }

    #[test]
    fn lines_after_the_guard_is_gone_are_dropped_not_blocking() {
        let sink = Sink::default();
        let (writer, guard) = start(sink.clone(), Pacing::default()).unwrap();
        (&writer).write_all(b"before\n").unwrap();
        drop(guard);
        (&writer).write_all(b"after\n").unwrap();
        assert_eq!(&*sink.bytes.lock().unwrap(), b"before\n");
    }
}
