//! The response headers Envoy forwards downstream (`response_headers_to_add`), describing
//! the descriptor with the fewest requests left.

use crate::digits::push_int;
use crate::proto::{DescriptorStatus, HeaderValue};

/// Which header set to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum HeaderMode {
    /// None.
    Off,
    /// draft-ietf-httpapi-ratelimit-headers: `RateLimit-Policy: "name";q=10;w=60` and
    /// `RateLimit: "name";r=3;t=42` (as the library's middleware writes them).
    #[default]
    Ietf,
    /// `x-ratelimit-limit: 10, 10;w=60`, `x-ratelimit-remaining: 3`,
    /// `x-ratelimit-reset: 42` (the set Envoy's local rate limit filter writes).
    XRatelimit,
    /// envoyproxy/ratelimit's set (`LIMIT_RESPONSE_HEADERS_ENABLED`), under its default
    /// names: `RateLimit-Limit: 10`, `RateLimit-Remaining: 3`, `RateLimit-Reset: 42`.
    Ratelimit,
}

/// The seconds of a protobuf duration, rounded up.
fn ceil_secs(d: Option<&prost_types::Duration>) -> i64 {
    d.map_or(0, |d| d.seconds + i64::from(d.nanos > 0))
}

/// Appends a structured-field String: quotes and backslashes escaped, other bytes outside
/// printable ASCII dropped.
fn push_sf_string(out: &mut String, s: &str) {
    out.push('"');
    if s.bytes()
        .all(|b| matches!(b, b' '..=b'~') && b != b'"' && b != b'\\')
    {
        // The usual name: nothing to escape or drop, one copy.
        out.push_str(s);
    } else {
        for c in s.chars() {
            match c {
                '"' | '\\' => {
                    out.push('\\');
                    out.push(c);
                }
                ' '..='~' => out.push(c),
                _ => {}
            }
        }
    }
    out.push('"');
}

/// The longest `;x=` parameter: its 3 bytes and an `i64`'s 20 characters.
const PARAM: usize = 3 + 20;

/// `n` in decimal, in a string that holds any `i64` without growing.
fn num(n: i64) -> String {
    let mut v = String::with_capacity(20);
    push_int(&mut v, n);
    v
}

/// The headers for `statuses`; `name(i)` is the name of status `i`'s limit (asked only of
/// the status the headers describe).
///
/// ```
/// use tollgate_server::headers::{headers, HeaderMode};
/// use tollgate_server::proto::{DescriptorStatus, RateLimit};
///
/// let status = DescriptorStatus {
///     code: 1,
///     current_limit: Some(RateLimit { name: String::new(), requests_per_unit: 10, unit: 2 }),
///     limit_remaining: 3,
///     duration_until_reset: Some(prost_types::Duration { seconds: 42, nanos: 0 }),
/// };
/// let hs = headers(HeaderMode::Ietf, &[status], |_| "per_user");
/// assert_eq!(hs[0].value, "\"per_user\";q=10;w=60");
/// assert_eq!(hs[1].value, "\"per_user\";r=3;t=42");
/// ```
pub fn headers<'a>(
    mode: HeaderMode,
    statuses: &[DescriptorStatus],
    name: impl FnOnce(usize) -> &'a str,
) -> Vec<HeaderValue> {
    if mode == HeaderMode::Off {
        return Vec::new();
    }
    let Some((i, s, limit)) = statuses
        .iter()
        .enumerate()
        .filter_map(|(i, s)| s.current_limit.as_ref().map(|l| (i, s, l)))
        .min_by_key(|(_, s, _)| s.limit_remaining)
    else {
        return Vec::new();
    };
    let window = crate::config::Unit::from_proto(limit.unit).map_or(0, |u| u.period().as_secs());
    let reset = ceil_secs(s.duration_until_reset.as_ref());
    let h = |k: &str, v: String| HeaderValue {
        key: k.to_string(),
        value: v,
        raw_value: Vec::new(),
    };
    let rpu = i64::from(limit.requests_per_unit);
    let window = i64::try_from(window).unwrap_or(i64::MAX);
    let remaining = i64::from(s.limit_remaining);
    match mode {
        HeaderMode::Off => Vec::new(),
        HeaderMode::Ietf => {
            // `"name";q=10;w=60` and `"name";r=3;t=42`: the quoted name at most doubles
            // (every byte escaped), and each string is sized once.
            let name = name(i);
            let mut policy = String::with_capacity(2 + 2 * name.len() + 2 * PARAM);
            push_sf_string(&mut policy, name);
            let mut now = String::with_capacity(policy.len() + 2 * PARAM);
            now.push_str(&policy);
            policy.push_str(";q=");
            push_int(&mut policy, rpu);
            policy.push_str(";w=");
            push_int(&mut policy, window);
            now.push_str(";r=");
            push_int(&mut now, remaining);
            now.push_str(";t=");
            push_int(&mut now, reset);
            vec![h("RateLimit-Policy", policy), h("RateLimit", now)]
        }
        HeaderMode::Ratelimit => {
            vec![
                h("RateLimit-Limit", num(rpu)),
                h("RateLimit-Remaining", num(remaining)),
                h("RateLimit-Reset", num(reset)),
            ]
        }
        HeaderMode::XRatelimit => {
            // `10, 10;w=60`, `3`, `42`.
            let mut limit = String::with_capacity(20 + 2 + 20 + PARAM);
            push_int(&mut limit, rpu);
            limit.push_str(", ");
            push_int(&mut limit, rpu);
            limit.push_str(";w=");
            push_int(&mut limit, window);
            vec![
                h("x-ratelimit-limit", limit),
                h("x-ratelimit-remaining", num(remaining)),
                h("x-ratelimit-reset", num(reset)),
            ]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::RateLimit;

    #[test]
    fn names_are_structured_field_strings() {
        let sf = |name: &str| {
            let mut out = String::new();
            push_sf_string(&mut out, name);
            out
        };
        assert_eq!(sf("per user ~1"), "\"per user ~1\"");
        assert_eq!(sf(""), "\"\"");
        assert_eq!(sf("a\"b\\c"), "\"a\\\"b\\\\c\"");
        assert_eq!(sf("caf\u{e9}\tx"), "\"cafx\"");
    }

    #[test]
    fn fewest_remaining_wins() {
        let st = |rem, rpu| DescriptorStatus {
            code: 1,
            current_limit: Some(RateLimit {
                name: String::new(),
                requests_per_unit: rpu,
                unit: 2,
            }),
            limit_remaining: rem,
            duration_until_reset: Some(prost_types::Duration {
                seconds: 41,
                nanos: 5,
            }),
        };
        let names = ["a", "b\""];
        let name = |i: usize| names[i];
        let hs = headers(HeaderMode::Ietf, &[st(5, 10), st(2, 3)], name);
        assert_eq!(hs[0].value, "\"b\\\"\";q=3;w=60");
        assert_eq!(hs[1].value, "\"b\\\"\";r=2;t=42");
        let hs = headers(HeaderMode::XRatelimit, &[st(5, 10)], name);
        assert_eq!(hs[0].value, "10, 10;w=60");
        assert_eq!(hs[2].value, "42");
        assert!(headers(HeaderMode::Off, &[st(5, 10)], name).is_empty());
        let hs = headers(HeaderMode::Ratelimit, &[st(5, 10)], name);
        let pairs: Vec<(&str, &str)> = hs
            .iter()
            .map(|h| (h.key.as_str(), h.value.as_str()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("RateLimit-Limit", "10"),
                ("RateLimit-Remaining", "5"),
                ("RateLimit-Reset", "42")
            ]
        );
    }
}
