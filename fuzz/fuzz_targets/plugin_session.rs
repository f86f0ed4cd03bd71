//! A whole plugin session as the controller's socket sees it: yamux frames (the session state
//! machine: SYN/ACK/FIN/RST, windows, pings, go-away), the control stream, dispensed Plugin
//! streams with net/rpc and gob. Invariants: no panic; once the input ends the session ends
//! within 5 s (no hang); the server never writes more than a bound proportional to the input.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use rollgate::goplugin::fuzzing::serve_session_bytes;

fn rt() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    })
}

fuzz_target!(|data: &[u8]| {
    let out = rt().block_on(serve_session_bytes(data, Duration::from_secs(5)));
    assert!(out.ended, "the session did not end within 5 s of its input ending");
    // Each frame (>= 12 bytes) is answered by at most a few frames and one reply of at most
    // a few KiB (Type, GetMetadata, Run's measurement, an error message).
    let bound = 4096 + data.len() * 512;
    assert!(out.written <= bound, "{} input bytes drew {} bytes of answer", data.len(), out.written);
});
