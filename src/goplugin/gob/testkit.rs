//! Hand-built gob streams for tests and benchmarks, not used by the product: the layouts a
//! hostile or unusual encoder may send, which Go's own encoder never produces on demand.

use super::encode::{put_slice_def, put_struct_def};
use super::wire::{put_bytes, put_int, put_uint};

/// Type ids of the layout: net/rpc's `Request`, a `RunArgs` struct and its `[]interface{}`.
const REQUEST: i64 = 65;
const RUN_ARGS: i64 = 66;
const PAD: i64 = 67;
/// gob's predefined ids used below.
const UINT: i64 = 3;
const STRING: i64 = 6;
const INTERFACE: i64 = 8;
/// Bytes of each padding element's string.
const ELEMENT_TEXT: usize = 16;

/// The message bodies of a net/rpc request for `Plugin.Run` whose argument is a `RunArgs`
/// interface value of about `size` bytes: a field `Pad` (unknown to rollgate, so skipped)
/// holding a `[]interface{}` of short strings. With `spanning`, the value is cut after every
/// element's interface name but the first's, so each element's type sequence continues in a message of its own
/// (as Go's encoder does after an inline type definition): one message per element. Without, the
/// value is one message.
pub fn plugin_run_request(seq: u64, size: usize, spanning: bool) -> Vec<Vec<u8>> {
    let mut msgs = Vec::new();
    let mut def = Vec::new();
    put_struct_def(
        &mut def,
        REQUEST,
        "Request",
        &[("ServiceMethod", STRING), ("Seq", UINT)],
    );
    msgs.push(std::mem::take(&mut def));
    let mut header = Vec::new();
    put_int(&mut header, REQUEST);
    put_uint(&mut header, 1);
    put_bytes(&mut header, b"Plugin.Run");
    put_uint(&mut header, 1);
    put_uint(&mut header, seq);
    put_uint(&mut header, 0);
    msgs.push(header);
    put_struct_def(&mut def, RUN_ARGS, "RunArgs", &[("Pad", PAD)]);
    msgs.push(std::mem::take(&mut def));
    put_slice_def(&mut def, PAD, "[]interface {}", INTERFACE);
    msgs.push(def);

    let element = 6 + ELEMENT_TEXT;
    let n = (size / element).max(1);
    let mut cur = Vec::new();
    put_int(&mut cur, INTERFACE);
    put_uint(&mut cur, 0);
    put_bytes(&mut cur, b"RunArgs");
    put_int(&mut cur, RUN_ARGS);
    put_uint(&mut cur, 0);
    put_uint(&mut cur, 1);
    put_uint(&mut cur, n as u64);
    for i in 0..n {
        put_bytes(&mut cur, b"S");
        if spanning && i > 0 {
            msgs.push(std::mem::take(&mut cur));
        }
        put_int(&mut cur, STRING);
        // Inside the value, a slice's length may not exceed the bytes left in its message:
        // the first element carries enough to cover the count.
        let text = if i == 0 && spanning {
            n.max(ELEMENT_TEXT)
        } else {
            ELEMENT_TEXT
        };
        let mut value = vec![0];
        put_bytes(&mut value, &vec![b'x'; text]);
        put_bytes(&mut cur, &value);
    }
    put_uint(&mut cur, 0);
    msgs.push(cur);
    msgs
}

/// The messages as a stream: each behind its length prefix.
pub fn frame(msgs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::with_capacity(msgs.iter().map(|m| m.len() + 9).sum());
    for m in msgs {
        put_uint(&mut out, m.len() as u64);
        out.extend_from_slice(m);
    }
    out
}
