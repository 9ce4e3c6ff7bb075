//! gRPC statuses as this server answers them: the codes it uses, and the
//! "trailers-only" response (one HEADERS frame ending the stream, carrying `grpc-status`
//! and a percent-encoded `grpc-message`), which is how gRPC reports an error that
//! happened before any response message.

use bytes::Bytes;
use h2::server::SendResponse;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE};
use http::{HeaderMap, Response, StatusCode};

/// `application/grpc`: the content type of every gRPC response.
pub(crate) const GRPC_CONTENT_TYPE: HeaderValue = HeaderValue::from_static("application/grpc");

/// `grpc-status`.
static GRPC_STATUS: HeaderName = HeaderName::from_static("grpc-status");

/// `grpc-message`.
static GRPC_MESSAGE: HeaderName = HeaderName::from_static("grpc-message");

/// The gRPC status codes this server answers with (`google.rpc.Code` numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Code {
    /// 0: the call was decided (its answer may still be OVER_LIMIT).
    Ok = 0,
    /// 3: the request is malformed (a bad message, a bad descriptor).
    InvalidArgument = 3,
    /// 8: the request message is larger than the server accepts.
    ResourceExhausted = 8,
    /// 12: a method or an encoding this server does not implement.
    Unimplemented = 12,
    /// 13: the call broke the gRPC framing (a truncated frame, two messages in a unary call).
    Internal = 13,
    /// 14: the backend (Redis) could not decide.
    Unavailable = 14,
}

/// A status and its message: why a call was not answered with a response message.
///
/// ```
/// use tollgate_server::grpc::{Code, Status};
/// let s = Status::new(Code::InvalidArgument, "domain: empty");
/// assert_eq!(s.code, Code::InvalidArgument);
/// assert_eq!(s.grpc_message(), "domain: empty");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// The code.
    pub code: Code,
    /// What went wrong, for the caller (sent percent-encoded in `grpc-message`).
    pub message: String,
}

impl Status {
    /// A status with `code` and `message`.
    pub fn new(code: Code, message: impl Into<String>) -> Status {
        Status {
            code,
            message: message.into(),
        }
    }

    /// The message as the `grpc-message` header carries it: percent-encoded, every byte
    /// outside printable ASCII (and `%` itself) as `%XX`, as the gRPC spec asks.
    pub fn grpc_message(&self) -> String {
        let mut out = String::with_capacity(self.message.len());
        for &b in self.message.as_bytes() {
            if (0x20..=0x7e).contains(&b) && b != b'%' {
                out.push(char::from(b));
            } else {
                out.push_str(&format!("%{b:02X}"));
            }
        }
        out
    }

    /// The trailers-only response's headers: `:status 200`, the content type,
    /// `grpc-status` and `grpc-message`.
    fn response(&self) -> Response<()> {
        let mut r = Response::new(());
        let h = r.headers_mut();
        h.insert(CONTENT_TYPE, GRPC_CONTENT_TYPE);
        h.insert(GRPC_STATUS.clone(), HeaderValue::from(self.code as u16));
        if let Ok(v) = HeaderValue::from_str(&self.grpc_message()) {
            h.insert(GRPC_MESSAGE.clone(), v);
        }
        r
    }
}

/// The trailers that end a successful call: `grpc-status: 0`.
pub(crate) fn ok_trailers() -> HeaderMap {
    let mut h = HeaderMap::with_capacity(1);
    h.insert(GRPC_STATUS.clone(), HeaderValue::from_static("0"));
    h
}

/// Ends the call with `status` as a trailers-only response.
pub(crate) fn send_status(respond: &mut SendResponse<Bytes>, status: &Status) {
    end(respond, status.response());
}

/// Ends a request that is not gRPC at all (a wrong method or content type) with a plain
/// HTTP status, as the gRPC spec asks of a server.
pub(crate) fn send_http(respond: &mut SendResponse<Bytes>, code: StatusCode) {
    let mut r = Response::new(());
    *r.status_mut() = code;
    end(respond, r);
}

/// Sends `response` as the stream's only frame. A stream the client has already reset
/// is left as it is.
fn end(respond: &mut SendResponse<Bytes>, response: Response<()>) {
    if let Err(e) = respond.send_response(response, true) {
        tracing::debug!(error = %e, "the client left before the status");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_message_is_percent_encoded() {
        let s = Status::new(Code::Internal, "100% sure: é\n");
        assert_eq!(s.grpc_message(), "100%25 sure: %C3%A9%0A");
        assert_eq!(
            Status::new(Code::Ok, "plain text").grpc_message(),
            "plain text"
        );
    }

    #[test]
    fn a_status_response_carries_code_and_message() {
        let r = Status::new(Code::Unimplemented, "no such method").response();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["grpc-status"], "12");
        assert_eq!(r.headers()["grpc-message"], "no such method");
        assert_eq!(r.headers()[CONTENT_TYPE], "application/grpc");
    }
}
