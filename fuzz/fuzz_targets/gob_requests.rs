//! gob + net/rpc request streams: headers, then the argument of every call the controller
//! sends (`Plugin.Run`, `Resume`, `Terminate`, `GarbageCollect`, `GetMetadata`, `InitPlugin`,
//! `Type`, `Dispenser.Dispense`, `Control.*`). Seeds: the Go host's fixtures.
//! Invariants: no panic; decoding never has more than 64 bytes live per input byte (plus a
//! fixed 1 MiB); decoding is deterministic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollgate::goplugin::fuzzing::decode_request_stream;

#[global_allocator]
static ALLOC: fuzz_support::Counting = fuzz_support::Counting;

fuzz_target!(|data: &[u8]| {
    let first = fuzz_support::assert_bounded(data.len(), 64, 1 << 20, || {
        let (calls, err) = decode_request_stream(data);
        format!("{calls:?} {err:?}")
    });
    let (calls, err) = decode_request_stream(data);
    assert_eq!(
        first,
        format!("{calls:?} {err:?}"),
        "decoding is not deterministic"
    );
});
