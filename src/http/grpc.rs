//! gRPC denials with google.rpc error details (feature `grpc`).
//!
//! `grpc-status-details-bin` carries a serialized `google.rpc.Status` (code, message,
//! details as `google.protobuf.Any`), base64-encoded as every `-bin` metadata value is.
//! The few messages involved are written here directly (protobuf wire format), so the
//! feature adds no dependency; tests decode them with tonic-types.

use std::time::Duration;

use http::header::{HeaderName, HeaderValue};

const RETRY_INFO: &str = "type.googleapis.com/google.rpc.RetryInfo";
const QUOTA_FAILURE: &str = "type.googleapis.com/google.rpc.QuotaFailure";

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A varint field (wire type 0); zero is the default and is not written.
fn field_varint(out: &mut Vec<u8>, number: u32, v: u64) {
    if v != 0 {
        varint(out, u64::from(number << 3));
        varint(out, v);
    }
}

/// A length-delimited field (wire type 2): strings, bytes, embedded messages.
fn field_bytes(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, u64::from(number << 3 | 2));
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// `google.protobuf.Any { type_url = 1, value = 2 }`.
fn any(type_url: &str, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(type_url.len() + value.len() + 4);
    field_bytes(&mut out, 1, type_url.as_bytes());
    field_bytes(&mut out, 2, value);
    out
}

/// `google.rpc.RetryInfo { retry_delay = 1: google.protobuf.Duration { seconds = 1, nanos = 2 } }`.
fn retry_info(delay: Duration) -> Vec<u8> {
    let mut duration = Vec::new();
    field_varint(&mut duration, 1, delay.as_secs());
    field_varint(&mut duration, 2, u64::from(delay.subsec_nanos()));
    let mut out = Vec::new();
    field_bytes(&mut out, 1, &duration);
    out
}

/// `google.rpc.QuotaFailure { repeated Violation violations = 1 }`,
/// `Violation { subject = 1, description = 2 }`.
fn quota_failure(violations: &[&str], description: &str) -> Vec<u8> {
    let mut out = Vec::new();
    for subject in violations {
        let mut v = Vec::new();
        field_bytes(&mut v, 1, subject.as_bytes());
        field_bytes(&mut v, 2, description.as_bytes());
        field_bytes(&mut out, 1, &v);
    }
    out
}

/// `google.rpc.Status { code = 1, message = 2, repeated Any details = 3 }` for a
/// RESOURCE_EXHAUSTED denial: RetryInfo (when waiting helps) and QuotaFailure.
fn status(code: u8, message: &str, retry: Option<Duration>, violated: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    field_varint(&mut out, 1, u64::from(code));
    field_bytes(&mut out, 2, message.as_bytes());
    if let Some(delay) = retry {
        field_bytes(&mut out, 3, &any(RETRY_INFO, &retry_info(delay)));
    }
    if !violated.is_empty() {
        field_bytes(
            &mut out,
            3,
            &any(QUOTA_FAILURE, &quota_failure(violated, message)),
        );
    }
    out
}

/// Standard base64 without padding (gRPC's encoding of binary metadata).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = u32::from(b[0]) << 16 | u32::from(b[1]) << 8 | u32::from(b[2]);
        let sextets = chunk.len() + 1;
        for i in 0..sextets {
            out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
        }
    }
    out
}

/// The `grpc-status-details-bin` header of a denial.
pub(crate) fn details_header(
    code: u8,
    message: &str,
    retry: Option<Duration>,
    violated: &[&str],
) -> (HeaderName, HeaderValue) {
    let encoded = base64(&status(code, message, retry, violated));
    (
        HeaderName::from_static("grpc-status-details-bin"),
        // base64 is visible ASCII: this cannot fail.
        HeaderValue::from_str(&encoded).unwrap_or_else(|_| HeaderValue::from_static("")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc_4648_vectors_without_padding() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg"),
            ("fo", "Zm8"),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg"),
            ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(input.as_bytes()), want);
        }
    }

    #[test]
    fn protobuf_fields() {
        let mut v = Vec::new();
        varint(&mut v, 300);
        assert_eq!(v, [0xac, 0x02]);
        // RetryInfo of 2 s: field 1 (len 2) holding Duration field 1 = 2.
        assert_eq!(retry_info(Duration::from_secs(2)), [0x0a, 0x02, 0x08, 0x02]);
    }
}
