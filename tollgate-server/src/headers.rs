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
    out.push('"');
}

/// The headers for `statuses` (names: the limit names, or `policy` when a limit has none).
pub fn headers(
    mode: HeaderMode,
    statuses: &[DescriptorStatus],
    names: &[&str],
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
            // `"name";q=10;w=60` and `"name";r=3;t=42`.
            let mut policy = String::with_capacity(48);
            push_sf_string(&mut policy, names.get(i).copied().unwrap_or("policy"));
            let mut now = policy.clone();
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
            let num = |n| {
                let mut v = String::with_capacity(8);
                push_int(&mut v, n);
                v
            };
            vec![
                h("RateLimit-Limit", num(rpu)),
                h("RateLimit-Remaining", num(remaining)),
                h("RateLimit-Reset", num(reset)),
            ]
        }
        HeaderMode::XRatelimit => {
            // `10, 10;w=60`, `3`, `42`.
            let mut limit = String::with_capacity(24);
            push_int(&mut limit, rpu);
            limit.push_str(", ");
            push_int(&mut limit, rpu);
            limit.push_str(";w=");
            push_int(&mut limit, window);
            let num = |n| {
                let mut v = String::with_capacity(8);
                push_int(&mut v, n);
                v
            };
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
        let hs = headers(HeaderMode::Ietf, &[st(5, 10), st(2, 3)], &names);
        assert_eq!(hs[0].value, "\"b\\\"\";q=3;w=60");
        assert_eq!(hs[1].value, "\"b\\\"\";r=2;t=42");
        let hs = headers(HeaderMode::XRatelimit, &[st(5, 10)], &names);
        assert_eq!(hs[0].value, "10, 10;w=60");
        assert_eq!(hs[2].value, "42");
        assert!(headers(HeaderMode::Off, &[st(5, 10)], &names).is_empty());
        let hs = headers(HeaderMode::Ratelimit, &[st(5, 10)], &names);
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
