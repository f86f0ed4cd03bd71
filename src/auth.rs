//! Bearer-token helpers shared by every surface that authenticates callers (`serve`'s HTTP
//! endpoints and `serve --grpc-listen`'s gRPC endpoint): pure functions over header bytes, so
//! that neither surface has to import the other.

/// The token of a `Bearer <token>` header value (scheme case-insensitive).
pub(crate) fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let scheme = value.get(..7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = value.get(7..)?.trim_ascii();
    (!token.is_empty()).then_some(token)
}

/// Compares in time that depends only on the lengths, not on where the bytes differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    let mut diff = u8::from(a.len() != b.len());
    for i in 0..a.len().max(b.len()) {
        let x = a.get(i).copied().unwrap_or(0);
        let y = b.get(i).copied().unwrap_or(0);
        diff |= std::hint::black_box(x ^ y);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bearer_tokens_are_taken_from_the_header_value() {
        assert_eq!(bearer_token(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"  bEaReR   abc  "), Some(&b"abc"[..]));
        assert_eq!(bearer_token(b"Bearer "), None);
        assert_eq!(bearer_token(b"Basic abc"), None);
        assert_eq!(bearer_token(b"Bear"), None);
    }
}
