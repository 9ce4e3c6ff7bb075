//! One unary `ShouldRateLimit` call on an HTTP/2 stream: check that it is gRPC, read the
//! one length-prefixed request message (returning the flow-control window as it is read),
//! decode it with prost, decide, and answer with the response message and
//! `grpc-status: 0` trailers, or with a trailers-only status.
//!
//! The gRPC message framing (the spec's "Length-Prefixed-Message"):
//!
//! ```text
//! byte 0      compressed flag: 0 (this server accepts no compression; 1 is refused
//!             with UNIMPLEMENTED, anything else is INTERNAL)
//! bytes 1..5  message length, big-endian u32
//! bytes 5..   the protobuf message
//! ```

use super::status::{ok_trailers, send_http, send_status, Code, Status, GRPC_CONTENT_TYPE};
use crate::engine::{DecideError, Engine};
use crate::proto::{RateLimitRequest, RateLimitResponse};
use bytes::{Bytes, BytesMut};
use h2::server::SendResponse;
use h2::RecvStream;
use http::header::CONTENT_TYPE;
use http::{Method, Request, Response, StatusCode};
use prost::Message;

/// The one method this server answers.
pub const PATH: &str = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";

/// The largest request message accepted (gRPC's customary default, as tonic's).
pub const MAX_MESSAGE: usize = 4 << 20;

/// Answers one call. Every way it can end sends an answer the client can read, unless
/// the client has already gone.
pub(crate) async fn answer(
    req: Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    engine: &Engine,
) {
    let (parts, mut body) = req.into_parts();
    if parts.method != Method::POST {
        return send_http(&mut respond, StatusCode::METHOD_NOT_ALLOWED);
    }
    if !is_grpc(parts.headers.get(CONTENT_TYPE)) {
        return send_http(&mut respond, StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }
    let outcome = if parts.uri.path() == PATH {
        decide(&mut body, engine).await
    } else {
        Err(Status::new(
            Code::Unimplemented,
            format!("unknown method {}", parts.uri.path()),
        ))
    };
    match outcome {
        Ok(message) => {
            let mut r = Response::new(());
            r.headers_mut().insert(CONTENT_TYPE, GRPC_CONTENT_TYPE);
            let sent = respond.send_response(r, false).and_then(|mut s| {
                s.send_data(message, false)?;
                s.send_trailers(ok_trailers())
            });
            if let Err(e) = sent {
                tracing::debug!(error = %e, "the client left before the answer");
            }
        }
        Err(status) => {
            crate::stats::call("grpc", "error");
            tracing::debug!(code = ?status.code, message = %status.message, "call refused");
            send_status(&mut respond, &status);
        }
    }
}

/// `application/grpc`, alone or with the `+proto` subtype or parameters.
fn is_grpc(content_type: Option<&http::HeaderValue>) -> bool {
    let Some(v) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    match v.strip_prefix("application/grpc") {
        Some(rest) => rest.is_empty() || rest.starts_with(';') || rest.starts_with("+proto"),
        None => false,
    }
}

/// Reads, decodes and decides the call; the framed response message.
async fn decide(body: &mut RecvStream, engine: &Engine) -> Result<Bytes, Status> {
    let message = read_message(body).await?;
    let request = RateLimitRequest::decode(message)
        .map_err(|e| Status::new(Code::InvalidArgument, format!("malformed request: {e}")))?;
    let response = engine.decide(&request).await.map_err(|e| match e {
        DecideError::InvalidArgument(m) => Status::new(Code::InvalidArgument, m),
        DecideError::Unavailable(m) => Status::new(Code::Unavailable, m),
    })?;
    Ok(Bytes::from(frame(&response)?))
}

/// `response` as one length-prefixed message, in one buffer of exactly its size.
///
/// Into a `Vec` (whose `BufMut` writes a byte as a push and a slice as one copy, where
/// `BytesMut`'s goes through `put_slice` for every byte of every varint), with prost's
/// `encode_raw`: the buffer is sized from `encoded_len` here, so `encode`'s own check of
/// the room left (a second `encoded_len` pass over the message) has nothing to catch.
fn frame(response: &RateLimitResponse) -> Result<Vec<u8>, Status> {
    let len = response.encoded_len();
    let prefix =
        u32::try_from(len).map_err(|_| Status::new(Code::Internal, "response too large"))?;
    let mut out = Vec::with_capacity(5 + len);
    out.push(0);
    out.extend_from_slice(&prefix.to_be_bytes());
    response.encode_raw(&mut out);
    debug_assert_eq!(out.len(), 5 + len, "encoded_len and encode_raw agree");
    Ok(out)
}

/// The request's one message, without its 5-byte prefix. Reads the stream to its end
/// (a unary call's request ends after its message), giving each chunk's flow-control
/// capacity back as it arrives.
async fn read_message(body: &mut RecvStream) -> Result<Bytes, Status> {
    // Almost always the whole frame is one DATA frame: kept as it came, no copy. Only a
    // frame split over several is joined.
    let mut single: Option<Bytes> = None;
    let mut joined = BytesMut::new();
    let mut len = 0;
    // A DATA frame that ends the stream is the last: it is not polled for again (the
    // usual request's one frame, read with one poll).
    let mut more = true;
    while more {
        let Some(chunk) = body.data().await else {
            break;
        };
        let chunk =
            chunk.map_err(|e| Status::new(Code::Internal, format!("reading the request: {e}")))?;
        more = !body.is_end_stream();
        let _ = body.flow_control().release_capacity(chunk.len());
        len += chunk.len();
        if len > 5 + MAX_MESSAGE {
            return Err(too_large(len - 5));
        }
        match single.take() {
            None if joined.is_empty() => single = Some(chunk),
            earlier => {
                joined.extend_from_slice(earlier.as_deref().unwrap_or_default());
                joined.extend_from_slice(&chunk);
            }
        }
    }
    let mut frame = single.unwrap_or_else(|| joined.freeze());
    unframe(&mut frame)?;
    Ok(frame)
}

/// Checks the length prefix of `frame` and strips it: exactly one uncompressed message.
fn unframe(frame: &mut Bytes) -> Result<(), Status> {
    if frame.is_empty() {
        return Err(Status::new(Code::Internal, "missing request message"));
    }
    if frame.len() < 5 {
        return Err(Status::new(Code::Internal, "truncated message prefix"));
    }
    let flag = frame[0];
    let len = u32::from_be_bytes([frame[1], frame[2], frame[3], frame[4]]) as usize;
    match flag {
        0 => {}
        1 => {
            return Err(Status::new(
                Code::Unimplemented,
                "compressed messages are not supported: send grpc-encoding identity",
            ))
        }
        f => {
            return Err(Status::new(
                Code::Internal,
                format!("invalid compressed flag {f}"),
            ))
        }
    }
    if len > MAX_MESSAGE {
        return Err(too_large(len));
    }
    match (frame.len() - 5).cmp(&len) {
        std::cmp::Ordering::Less => Err(Status::new(Code::Internal, "truncated message")),
        std::cmp::Ordering::Greater => Err(Status::new(
            Code::Internal,
            "more than one request message in a unary call",
        )),
        std::cmp::Ordering::Equal => {
            let _ = frame.split_to(5);
            Ok(())
        }
    }
}

fn too_large(len: usize) -> Status {
    Status::new(
        Code::ResourceExhausted,
        format!("request message of {len} bytes is larger than the {MAX_MESSAGE} accepted"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn framed(flag: u8, declared: u32, body: &[u8]) -> Bytes {
        let mut b = vec![flag];
        b.extend_from_slice(&declared.to_be_bytes());
        b.extend_from_slice(body);
        Bytes::from(b)
    }

    #[test]
    fn one_uncompressed_message_is_unframed() {
        let mut f = framed(0, 3, b"abc");
        assert_eq!(unframe(&mut f), Ok(()));
        assert_eq!(&f[..], b"abc");
        let mut empty = framed(0, 0, b"");
        assert_eq!(unframe(&mut empty), Ok(()));
        assert!(empty.is_empty());
    }

    #[test]
    fn bad_frames_get_their_status() {
        let code = |mut f: Bytes| unframe(&mut f).unwrap_err().code;
        assert_eq!(code(Bytes::new()), Code::Internal);
        assert_eq!(code(Bytes::from_static(&[0, 0, 0])), Code::Internal);
        assert_eq!(code(framed(0, 4, b"abc")), Code::Internal);
        assert_eq!(code(framed(0, 2, b"abc")), Code::Internal);
        assert_eq!(code(framed(1, 3, b"abc")), Code::Unimplemented);
        assert_eq!(code(framed(7, 3, b"abc")), Code::Internal);
        assert_eq!(code(framed(0, u32::MAX, b"abc")), Code::ResourceExhausted);
    }

    /// The framed response is the prefix and the message exactly as prost's `encode`
    /// writes it, for an empty response and one with statuses and headers.
    #[test]
    fn responses_are_framed_as_encoded() {
        use crate::proto::{DescriptorStatus, HeaderValue, RateLimit};
        let full = RateLimitResponse {
            overall_code: 2,
            statuses: vec![
                DescriptorStatus {
                    code: 2,
                    current_limit: Some(RateLimit {
                        name: "per user".into(),
                        requests_per_unit: 1_000_000,
                        unit: 1,
                    }),
                    limit_remaining: 0,
                    duration_until_reset: Some(prost_types::Duration {
                        seconds: 1,
                        nanos: 0,
                    }),
                },
                DescriptorStatus::default(),
            ],
            response_headers_to_add: vec![HeaderValue {
                key: "RateLimit".into(),
                value: "\"per user\";r=0;t=1".into(),
                raw_value: Vec::new(),
            }],
            request_headers_to_add: Vec::new(),
        };
        for response in [RateLimitResponse::default(), full] {
            let mut expected = BytesMut::new();
            response.encode(&mut expected).unwrap();
            let framed = frame(&response).unwrap();
            assert_eq!(framed[0], 0);
            assert_eq!(
                framed[1..5],
                u32::try_from(expected.len()).unwrap().to_be_bytes()
            );
            assert_eq!(framed[5..], expected[..]);
            let mut message = Bytes::from(framed);
            unframe(&mut message).unwrap();
            assert_eq!(RateLimitResponse::decode(message).unwrap(), response);
        }
    }

    #[test]
    fn grpc_content_types() {
        let ok = |s: &'static str| is_grpc(Some(&http::HeaderValue::from_static(s)));
        assert!(ok("application/grpc"));
        assert!(ok("application/grpc+proto"));
        assert!(ok("application/grpc;charset=utf-8"));
        assert!(!ok("application/grpc+json"));
        assert!(!ok("application/json"));
        assert!(!ok("application/grpcx"));
        assert!(!is_grpc(None));
    }
}
