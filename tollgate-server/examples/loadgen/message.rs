//! The gRPC messages of `--api grpc-raw`: a request's DATA frame (gRPC's 5-byte prefix
//! and the prost-encoded `RateLimitRequest`, written in place into the output buffer) and
//! a response's message, put together from DATA frames and decoded with prost.

use crate::h2::{patch_header, DATA, END_STREAM, HEADER_LEN};
use crate::streams::Stream;
use prost::Message;
use std::fmt::Write as _;
use tollgate_server::proto::{RateLimitRequest, RateLimitResponse};

/// Bytes before a request's message: the DATA frame header and gRPC's 5-byte prefix.
const BODY_PREFIX: usize = HEADER_LEN + 5;

/// Appends the DATA frame (END_STREAM) of call `call`'s request on stream `id`: gRPC's
/// prefix and the prost-encoded request; returns the frame's payload length.
pub(crate) fn put_body(
    out: &mut Vec<u8>,
    req: &mut RateLimitRequest,
    keys: u64,
    call: u64,
    id: u32,
) -> usize {
    let value = &mut req.descriptors[0].entries[0].value;
    value.clear();
    let _ = write!(value, "v{}", call % keys);
    let at = out.len();
    out.extend_from_slice(&[0; BODY_PREFIX]);
    req.encode(out).expect("a Vec grows as needed");
    let msg = out.len() - at - BODY_PREFIX;
    patch_header(out, at, msg + 5, DATA, END_STREAM, id);
    out[at + HEADER_LEN] = 0; // not compressed
    out[at + HEADER_LEN + 1..at + BODY_PREFIX].copy_from_slice(&(msg as u32).to_be_bytes());
    msg + 5
}

/// Adds a DATA frame's bytes to stream `s`'s response: decodes each whole gRPC message.
pub(crate) fn take_message(s: &mut Stream, data: &[u8], resp: &mut RateLimitResponse) {
    if s.partial.is_empty() && data.len() >= 5 {
        let n = u32::from_be_bytes([data[1], data[2], data[3], data[4]]) as usize;
        if data.len() == 5 + n {
            decode(s, data[0], &data[5..], resp);
            return;
        }
    }
    s.partial.extend_from_slice(data);
    while s.partial.len() >= 5 {
        let p = &s.partial;
        let n = u32::from_be_bytes([p[1], p[2], p[3], p[4]]) as usize;
        if p.len() < 5 + n {
            break;
        }
        let whole = std::mem::take(&mut s.partial);
        decode(s, whole[0], &whole[5..5 + n], resp);
        s.partial = whole;
        s.partial.drain(..5 + n);
    }
}

/// Decodes one response message of stream `s` (`flag`: gRPC's compressed flag).
fn decode(s: &mut Stream, flag: u8, msg: &[u8], resp: &mut RateLimitResponse) {
    if flag != 0 || s.code.is_some() {
        // A compressed message (we accept no encoding) or a second one (a unary call).
        s.bad = true;
        return;
    }
    resp.clear();
    match resp.merge(msg) {
        Ok(()) => s.code = Some(resp.overall_code),
        Err(_) => s.bad = true,
    }
}
