//! Go's `time.Time` binary form (time.MarshalBinary), which `metav1.Time` sends as a
//! GobEncoder blob.

use chrono::{DateTime, Utc};

use super::decode::{GobDecode, ValueDecoder};
use super::types::MarshalKind;
use super::GobError;

/// Seconds from 0001-01-01T00:00:00Z (Go's internal epoch) to the Unix epoch.
const UNIX_TO_INTERNAL: i64 = 62_135_596_800;

/// Go's zero `time.Time` (0001-01-01T00:00:00Z): what a nil `*metav1.Time` means.
pub(crate) fn go_zero_time() -> DateTime<Utc> {
    DateTime::from_timestamp(-UNIX_TO_INTERNAL, 0).unwrap_or(DateTime::<Utc>::MIN_UTC)
}

/// `t` in Go's MarshalBinary form: version 1, seconds since year 1, nanoseconds, zone offset
/// -1 (UTC).
pub(crate) fn encode_go_time(t: &DateTime<Utc>) -> [u8; 15] {
    let sec = t.timestamp().saturating_add(UNIX_TO_INTERNAL);
    // chrono folds a leap second into nanoseconds >= 1e9; Go has no such instant.
    let nsec = t.timestamp_subsec_nanos().min(999_999_999).cast_signed();
    let mut out = [0u8; 15];
    out[0] = 1;
    out[1..9].copy_from_slice(&sec.to_be_bytes());
    out[9..13].copy_from_slice(&nsec.to_be_bytes());
    out[13..15].copy_from_slice(&(-1i16).to_be_bytes());
    out
}

/// Parses Go's MarshalBinary form (version 1, or 2 with a seconds-of-offset byte). The zone
/// offset only affects how Go displays the instant, so it is dropped.
pub(crate) fn decode_go_time(b: &[u8]) -> Result<DateTime<Utc>, GobError> {
    let want = match b.first() {
        Some(1) => 15,
        Some(2) => 16,
        _ => return Err(GobError::Corrupt("unsupported time version")),
    };
    if b.len() != want {
        return Err(GobError::Corrupt("invalid time length"));
    }
    let mut sec = [0u8; 8];
    sec.copy_from_slice(b.get(1..9).ok_or(GobError::Truncated)?);
    let mut nsec = [0u8; 4];
    nsec.copy_from_slice(b.get(9..13).ok_or(GobError::Truncated)?);
    let sec = i64::from_be_bytes(sec);
    let nsec = i32::from_be_bytes(nsec);
    let nsec = u32::try_from(nsec)
        .ok()
        .filter(|n| *n < 1_000_000_000)
        .ok_or(GobError::Corrupt("invalid time nanoseconds"))?;
    sec.checked_sub(UNIX_TO_INTERNAL)
        .and_then(|unix| DateTime::from_timestamp(unix, nsec))
        .ok_or(GobError::Corrupt("time out of range"))
}

/// A `metav1.Time` (or `time.Time`) value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GoTime(pub DateTime<Utc>);

impl Default for GoTime {
    fn default() -> Self {
        GoTime(go_zero_time())
    }
}

impl GobDecode for GoTime {
    fn decode(d: &mut ValueDecoder<'_>, id: i64) -> Result<Self, GobError> {
        match d.marshal_kind(id) {
            Some(MarshalKind::Gob | MarshalKind::Binary) => {
                decode_go_time(d.read_bytes()?).map(GoTime)
            }
            _ => Err(GobError::Mismatch {
                local: "metav1.Time",
                remote: id,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_with_nanoseconds() {
        let t = DateTime::from_timestamp(1_700_000_000, 123_456_789).unwrap();
        let b = encode_go_time(&t);
        assert_eq!(decode_go_time(&b).unwrap(), t);
    }

    #[test]
    fn matches_go_bytes_for_unix_epoch() {
        // time.Unix(0, 0).UTC().MarshalBinary()
        let go = [1, 0, 0, 0, 14, 119, 145, 247, 0, 0, 0, 0, 0, 255, 255];
        let t = DateTime::from_timestamp(0, 0).unwrap();
        assert_eq!(encode_go_time(&t), go);
        assert_eq!(decode_go_time(&go).unwrap(), t);
    }

    #[test]
    fn version_two_and_offsets_are_accepted() {
        // Version 2 carries a seconds-of-offset byte; the instant is unchanged by the zone.
        let mut b = encode_go_time(&DateTime::from_timestamp(86_400, 5).unwrap()).to_vec();
        b[0] = 2;
        b[13..15].copy_from_slice(&60i16.to_be_bytes());
        b.push(30);
        assert_eq!(decode_go_time(&b).unwrap().timestamp(), 86_400);
    }

    #[test]
    fn bad_blobs_are_errors() {
        assert!(decode_go_time(&[]).is_err());
        assert!(decode_go_time(&[3; 15]).is_err());
        assert!(decode_go_time(&[1; 14]).is_err());
        let mut b = encode_go_time(&DateTime::from_timestamp(0, 0).unwrap());
        b[9..13].copy_from_slice(&(-1i32).to_be_bytes());
        assert!(decode_go_time(&b).is_err());
        let mut b = [0u8; 15];
        b[0] = 1;
        b[1..9].copy_from_slice(&i64::MAX.to_be_bytes());
        assert!(decode_go_time(&b).is_err());
    }

    #[test]
    fn zero_time_is_year_one() {
        let z = go_zero_time();
        assert_eq!(z.to_rfc3339(), "0001-01-01T00:00:00+00:00");
        assert_eq!(&encode_go_time(&z)[1..9], &0i64.to_be_bytes());
    }
}
