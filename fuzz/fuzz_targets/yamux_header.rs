//! yamux frame headers: every 12 bytes parse or fail cleanly, and a parsed header re-encodes
//! to the same bytes (version 0, type <= go-away).
#![no_main]

use libfuzzer_sys::fuzz_target;
use rollgate::goplugin::fuzzing::{parse_yamux_header, YAMUX_HEADER_SIZE};

fuzz_target!(|data: &[u8]| {
    let Some(h) = data.get(..YAMUX_HEADER_SIZE) else {
        return;
    };
    let h: [u8; YAMUX_HEADER_SIZE] = h.try_into().expect("12 bytes");
    if let Ok((ty, flags, stream, length)) = parse_yamux_header(&h) {
        let mut again = vec![0u8, ty];
        again.extend_from_slice(&flags.to_be_bytes());
        again.extend_from_slice(&stream.to_be_bytes());
        again.extend_from_slice(&length.to_be_bytes());
        assert_eq!(&again[..], &h[..]);
        assert!(ty <= 3);
    } else {
        assert!(h[0] != 0 || h[1] > 3, "a valid header was refused: {h:?}");
    }
});
