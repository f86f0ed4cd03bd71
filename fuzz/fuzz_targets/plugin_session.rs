//! A whole plugin session as the controller's socket sees it: yamux frames (the session state
//! machine: SYN/ACK/FIN/RST, windows, pings, go-away), the control stream, dispensed Plugin
//! streams with net/rpc and gob. Invariants: no panic; once the input ends the session ends
//! within 5 s of (virtual) time (no deadlock; a busy loop is libFuzzer's -timeout); the server never writes more than a bound proportional to the input.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rollgate::goplugin::fuzzing::serve_session_bytes;

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        // A paused clock: timers (the settle time, the budget, the server's own timeouts)
        // fire as soon as every task is idle, so a session costs no wall-clock waiting.
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime")
    })
}

const SETTLE: &[u8] = b"--settle--";

fn split<'a>(mut data: &'a [u8], sep: &[u8]) -> Vec<&'a [u8]> {
    let mut out = Vec::new();
    while let Some(i) = data.windows(sep.len()).position(|w| w == sep) {
        out.push(&data[..i]);
        data = &data[i + sep.len()..];
    }
    out.push(data);
    out
}

fuzz_target!(|data: &[u8]| {
    // The host waits for answers (a Dispense before opening its stream): the input's chunks
    // are separated by SETTLE, and the server settles after each.
    let chunks = split(data, SETTLE);
    let out = rt().block_on(serve_session_bytes(&chunks, Duration::from_secs(5)));
    if std::env::var_os("FUZZ_DEBUG").is_some() {
        eprintln!("{} bytes in: {out:?}", data.len());
    }
    assert!(
        out.ended,
        "the session did not end within 5 s of its input ending"
    );
    // Each frame (>= 12 bytes) is answered by at most a few frames and one reply of at most
    // a few KiB (Type, GetMetadata, Run's measurement, an error message).
    let bound = 4096 + data.len() * 512;
    assert!(
        out.written <= bound,
        "{} input bytes drew {} bytes of answer",
        data.len(),
        out.written
    );
});
