//! Headers and denial responses: draft-ietf-httpapi-ratelimit-headers-11, RFC 9110
//! `Retry-After`, RFC 6585 429, RFC 9457 problem details, gRPC status mapping.

use std::fmt::Write as _;
use std::time::Duration;

use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderMap, Response, StatusCode};

use super::body::ResponseBody;
use super::decide::Report;
use super::policy::Policy;

pub(crate) const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
pub(crate) const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const X_LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
const X_REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
const X_RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");

/// The problem type the ratelimit-headers draft registers for a denied request.
pub(crate) const QUOTA_EXCEEDED: &str =
    "https://iana.org/assignments/http-problem-types#quota-exceeded";

/// Whole seconds, rounded up: a wait of 1 ns is 1 s, never 0.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Appends `n` in decimal (what `write!` does, without the formatting machinery on the
/// hot path).
fn push_u64(out: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &b in &buf[i..] {
        out.push(b as char);
    }
}

/// A structured-field String (RFC 9651 §3.3.3): quoted, `"` and `\` escaped. Policy names
/// are printable ASCII by construction.
fn sf_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

fn header(s: String) -> HeaderValue {
    // Built from printable ASCII only, so this cannot fail; an empty value is the
    // fallback that keeps the response well-formed if it ever did. The String's buffer
    // becomes the value's (no copy).
    HeaderValue::from_maybe_shared(Bytes::from(s)).unwrap_or_else(|_| HeaderValue::from_static(""))
}

/// `RateLimit-Policy: "ip";q=3;w=60, "global";q=1000;w=1` over every policy whose
/// decisions clients are told (not a shadow policy, unless it asks): `q` the quota's
/// limit (never the burst), `w` its period in whole seconds (rounded up, at least 1).
pub(crate) fn policy_header(policies: &[Policy]) -> HeaderValue {
    let mut s = String::new();
    for p in policies.iter().filter(|p| p.in_headers()) {
        if !s.is_empty() {
            s.push_str(", ");
        }
        let q = p.quota();
        sf_string(&mut s, p.name());
        let _ = write!(s, ";q={};w={}", q.limit(), ceil_secs(q.period()).max(1));
    }
    header(s)
}

/// Seconds until capacity returns: for a denial, until this request fits; otherwise
/// until the quota is whole again.
fn t_secs(r: &Report) -> u64 {
    match r.decision {
        Some(d) => ceil_secs(d.retry_after().unwrap_or_else(|| d.reset_after())),
        None => 0,
    }
}

/// `RateLimit: "ip";r=2;t=41` for every policy that decided this request, but a shadow
/// policy that does not ask to be shown.
pub(crate) fn ratelimit_header(policies: &[Policy], reports: &[Report]) -> Option<HeaderValue> {
    let mut s = String::with_capacity(32 * reports.len());
    for r in reports.iter().filter(|r| policies[r.policy].in_headers()) {
        let Some(d) = r.decision else { continue };
        if !s.is_empty() {
            s.push_str(", ");
        }
        sf_string(&mut s, policies[r.policy].name());
        s.push_str(";r=");
        push_u64(&mut s, u64::from(d.remaining()));
        s.push_str(";t=");
        push_u64(&mut s, t_secs(r));
    }
    (!s.is_empty()).then(|| header(s))
}

/// The response options of a layer.
#[derive(Clone, Debug)]
pub(crate) struct Headers {
    pub(crate) on_allowed: bool,
    pub(crate) legacy: bool,
    pub(crate) policy: HeaderValue,
}

/// The fields the layer adds to one response: small, because the response future carries
/// it (the legacy trio, rarely asked for, is boxed).
#[derive(Debug, Default)]
pub(crate) struct Fields {
    policy: Option<HeaderValue>,
    ratelimit: Option<HeaderValue>,
    legacy: Option<Box<[HeaderValue; 3]>>,
}

impl Fields {
    pub(crate) fn is_empty(&self) -> bool {
        self.ratelimit.is_none() && self.legacy.is_none()
    }

    /// Inserts every field into `headers`, replacing what is there.
    pub(crate) fn insert_into(self, headers: &mut HeaderMap) {
        for (name, value) in self.into_iter() {
            headers.insert(name, value);
        }
    }

    pub(crate) fn into_iter(self) -> impl Iterator<Item = (HeaderName, HeaderValue)> {
        let ietf = self
            .policy
            .map(|v| (RATELIMIT_POLICY, v))
            .into_iter()
            .chain(self.ratelimit.map(|v| (RATELIMIT, v)));
        let legacy = self.legacy.into_iter().flat_map(|b| {
            let [limit, remaining, reset] = *b;
            [(X_LIMIT, limit), (X_REMAINING, remaining), (X_RESET, reset)]
        });
        ietf.chain(legacy)
    }
}

/// The rate-limit fields of `reports`: `RateLimit-Policy` and `RateLimit` when `ietf`,
/// and the legacy `X-RateLimit-*` when the layer asks for them.
pub(crate) fn fields(
    opts: &Headers,
    policies: &[Policy],
    reports: &[Report],
    ietf: bool,
) -> Fields {
    let mut out = Fields::default();
    if ietf {
        if let Some(v) = ratelimit_header(policies, reports) {
            out.policy = Some(opts.policy.clone());
            out.ratelimit = Some(v);
        }
    }
    if opts.legacy {
        // The most constrained decision shown to clients: the fewest remaining.
        if let Some((r, d)) = reports
            .iter()
            .filter(|r| policies[r.policy].in_headers())
            .filter_map(|r| r.decision.map(|d| (r, d)))
            .min_by_key(|(_, d)| d.remaining())
        {
            let limit = policies[r.policy].quota().limit();
            out.legacy = Some(Box::new([
                HeaderValue::from(limit),
                HeaderValue::from(d.remaining()),
                HeaderValue::from(t_secs(r)),
            ]));
        }
    }
    out
}

/// `Retry-After` of a denial: the longest wait among the denying reports, whole seconds
/// rounded up, at least 1 (so never earlier than their `t`). `None` when the request can
/// never fit.
pub(crate) fn retry_after(reports: &[Report]) -> Option<u64> {
    let mut secs = None;
    for r in reports.iter().filter(|r| r.denied()) {
        let d = r.decision?;
        let wait = ceil_secs(d.retry_after().unwrap_or_default()).max(1);
        secs = Some(secs.map_or(wait, |s: u64| s.max(wait)));
    }
    secs
}

/// Whether the request is gRPC (`application/grpc`, `application/grpc+proto`, ...).
pub(crate) fn is_grpc(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/grpc"))
}

/// A JSON string literal (RFC 8259), for the problem body.
fn json_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// An RFC 9457 `application/problem+json` body.
fn problem(kind: &str, status: StatusCode, detail: &str, violated: &[&str]) -> Bytes {
    let mut s = String::from("{\"type\":");
    json_string(&mut s, kind);
    s.push_str(",\"title\":");
    json_string(&mut s, status.canonical_reason().unwrap_or("Error"));
    let _ = write!(s, ",\"status\":{},\"detail\":", status.as_u16());
    json_string(&mut s, detail);
    if !violated.is_empty() {
        s.push_str(",\"violated-policies\":[");
        for (i, v) in violated.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            json_string(&mut s, v);
        }
        s.push(']');
    }
    s.push('}');
    Bytes::from(s)
}

/// The gRPC code for an HTTP status the layer answers with.
fn grpc_code(status: StatusCode) -> u8 {
    match status {
        StatusCode::TOO_MANY_REQUESTS => 8,      // RESOURCE_EXHAUSTED
        StatusCode::BAD_REQUEST => 3,            // INVALID_ARGUMENT
        StatusCode::UNAUTHORIZED => 16,          // UNAUTHENTICATED
        StatusCode::FORBIDDEN => 7,              // PERMISSION_DENIED
        StatusCode::SERVICE_UNAVAILABLE => 14,   // UNAVAILABLE
        StatusCode::INTERNAL_SERVER_ERROR => 13, // INTERNAL
        _ => 2,                                  // UNKNOWN
    }
}

/// What the layer answers instead of calling the service.
pub(crate) struct Refusal<'a> {
    pub(crate) status: StatusCode,
    pub(crate) detail: String,
    pub(crate) violated: Vec<&'a str>,
    pub(crate) retry_after: Option<u64>,
}

/// Builds the refusal for an HTTP or a gRPC client.
pub(crate) fn refuse<B>(grpc: bool, refusal: &Refusal<'_>) -> Response<ResponseBody<B>> {
    if grpc {
        return grpc_refusal(refusal);
    }
    let kind = if refusal.status == StatusCode::TOO_MANY_REQUESTS {
        QUOTA_EXCEEDED
    } else {
        "about:blank"
    };
    let body = problem(kind, refusal.status, &refusal.detail, &refusal.violated);
    let mut resp = Response::new(ResponseBody::own(body));
    *resp.status_mut() = refusal.status;
    let h = resp.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    if let Some(secs) = refusal.retry_after {
        h.insert(RETRY_AFTER, HeaderValue::from(secs));
    }
    resp
}

/// gRPC: HTTP 200, trailers-only, `grpc-status` (8 for a denial), `grpc-message`, and with
/// the `grpc` feature RetryInfo and QuotaFailure in `grpc-status-details-bin`. Never an
/// HTTP 429: gRPC clients map it to UNAVAILABLE and retry at once.
fn grpc_refusal<B>(refusal: &Refusal<'_>) -> Response<ResponseBody<B>> {
    let code = grpc_code(refusal.status);
    let mut resp = Response::new(ResponseBody::default());
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/grpc"));
    h.insert(
        HeaderName::from_static("grpc-status"),
        HeaderValue::from(u16::from(code)),
    );
    h.insert(
        HeaderName::from_static("grpc-message"),
        header(grpc_message(&refusal.detail)),
    );
    #[cfg(feature = "grpc")]
    if code == 8 {
        let retry = refusal.retry_after.map(std::time::Duration::from_secs);
        let (name, value) =
            super::grpc::details_header(code, &refusal.detail, retry, &refusal.violated);
        h.insert(name, value);
    }
    resp
}

/// Percent-encodes a `grpc-message` (gRPC over HTTP/2: bytes outside 0x20-0x7E and `%`).
fn grpc_message(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal() {
        for n in [0, 7, 10, 1234567890, u64::MAX] {
            let mut s = String::new();
            push_u64(&mut s, n);
            assert_eq!(s, n.to_string());
        }
    }

    #[test]
    fn seconds_round_up_and_never_zero() {
        assert_eq!(ceil_secs(Duration::from_nanos(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1500)), 2);
        assert_eq!(ceil_secs(Duration::from_secs(2)), 2);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }

    #[test]
    fn strings_are_escaped() {
        let mut s = String::new();
        sf_string(&mut s, "a\"b\\c");
        assert_eq!(s, r#""a\"b\\c""#);
        let body = problem("t", StatusCode::TOO_MANY_REQUESTS, "x\"\n", &["p"]);
        assert_eq!(
            &body[..],
            br#"{"type":"t","title":"Too Many Requests","status":429,"detail":"x\"\u000a","violated-policies":["p"]}"#
        );
        assert_eq!(grpc_message("50% off\u{e9}"), "50%25 off%C3%A9");
    }

    #[test]
    fn grpc_codes() {
        assert_eq!(grpc_code(StatusCode::TOO_MANY_REQUESTS), 8);
        // A request no policy could key (the default MissingKey::Fail): INTERNAL.
        assert_eq!(grpc_code(StatusCode::INTERNAL_SERVER_ERROR), 13);
        assert_eq!(grpc_code(StatusCode::SERVICE_UNAVAILABLE), 14);
        assert_eq!(grpc_code(StatusCode::IM_A_TEAPOT), 2);
    }
}
