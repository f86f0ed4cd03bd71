//! JSON strings written by hand, byte for byte as serde_json writes them, for the two places
//! that write much JSON text without a serializer: the access log (`logging`) and
//! `backtest -o json`'s timeline (`cli::backtest_json`). serde_json escapes byte by byte
//! through `io::Write` calls; a backtest's timeline is some 15 MB of messages and values full
//! of quotes, and every access-log line escapes its names and strings.

const LOWS: u64 = 0x7f7f_7f7f_7f7f_7f7f;
const ONES: u64 = 0x0101_0101_0101_0101;

/// The high bit of every byte of `t` that is zero, and no other bit (exact per byte: the
/// low seven bits plus 0x7f cannot carry into the next byte).
fn zero_bytes(t: u64) -> u64 {
    !(((t & LOWS).wrapping_add(LOWS)) | t | LOWS)
}

/// The high bit of every byte of `w` that JSON escapes: below 0x20 (its top three bits
/// clear), a quote or a backslash.
fn escape_mask(w: u64) -> u64 {
    zero_bytes(w & (ONES * 0xe0))
        | zero_bytes(w ^ (ONES * u64::from(b'"')))
        | zero_bytes(w ^ (ONES * u64::from(b'\\')))
}

/// Appends `s` as a JSON string, quotes included.
pub(crate) fn push_quoted(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    push_content(out, s);
    out.push(b'"');
}

/// Appends `s` escaped as the content of a JSON string (no quotes): `\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r`, `\t`, other control characters as `\u00xx`, everything else as it is. The
/// next byte to escape is found eight bytes at a time, and the text up to it copied at once.
pub(crate) fn push_content(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    let mut start = 0; // first byte not yet copied
    let mut i = 0; // first byte not yet looked at
    while i < bytes.len() {
        let mut word = [b'a'; 8]; // a short tail is padded with a byte that needs no escape
        let n = match bytes.get(i..i + 8) {
            Some(full) => {
                word.copy_from_slice(full);
                8
            }
            None => {
                let rest = bytes.get(i..).unwrap_or_default();
                word[..rest.len()].copy_from_slice(rest);
                rest.len()
            }
        };
        let mask = escape_mask(u64::from_le_bytes(word));
        if mask == 0 {
            i += n;
            continue;
        }
        let at = i + usize::try_from(mask.trailing_zeros() / 8).unwrap_or(0);
        let b = bytes.get(at).copied().unwrap_or(b'a');
        out.extend_from_slice(bytes.get(start..at).unwrap_or_default());
        match escape_of(b) {
            Some(Escape::Short(c)) => out.extend_from_slice(&[b'\\', c]),
            Some(Escape::Unicode) => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            None => out.push(b),
        }
        start = at + 1;
        i = at + 1;
    }
    out.extend_from_slice(bytes.get(start..).unwrap_or_default());
}

/// How one byte is escaped.
enum Escape {
    /// A backslash and this character.
    Short(u8),
    /// `\u00xx`.
    Unicode,
}

fn escape_of(b: u8) -> Option<Escape> {
    Some(match b {
        b'"' => Escape::Short(b'"'),
        b'\\' => Escape::Short(b'\\'),
        0x08 => Escape::Short(b'b'),
        0x0c => Escape::Short(b'f'),
        b'\n' => Escape::Short(b'n'),
        b'\r' => Escape::Short(b'r'),
        b'\t' => Escape::Short(b't'),
        0x00..=0x1f => Escape::Unicode,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn escaped_string(s: &str) -> String {
        let mut out = Vec::new();
        push_quoted(&mut out, s);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn escapes_as_serde_json_does() {
        for s in [
            "",
            "plain text of more than eight bytes",
            "\"",
            "a\\b",
            "{\"alpha\":0.05,\"canary\":{\"bad\":75,\"rate\":0.005}}",
            "\u{0}\u{1}\u{8}\t\n\u{b}\u{c}\r\u{1f} \u{7f}",
            "é ü 漢字 😀 \"mixed\"\u{2028}",
            "1234567\"",
            "12345678\"",
        ] {
            assert_eq!(
                escaped_string(s),
                serde_json::to_string(s).unwrap(),
                "{s:?}"
            );
        }
    }

    proptest! {
        #[test]
        fn escapes_any_string_as_serde_json_does(s in any::<String>()) {
            prop_assert_eq!(escaped_string(&s), serde_json::to_string(&s).unwrap());
        }

        #[test]
        fn escapes_json_like_strings_as_serde_json_does(s in "[\"\\\\a-z0-9{}:,.\\n\\t\\u{1}é]{0,64}") {
            prop_assert_eq!(escaped_string(&s), serde_json::to_string(&s).unwrap());
        }
    }
}
