//! Forwarding headers: the hops of an `X-Forwarded-For` line and of an RFC 7239
//! `Forwarded` line, left to right.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

/// One entry of a forwarding header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Hop {
    Ip(IpAddr),
    /// `unknown`, an obfuscated identifier, a missing `for=`, or garbage.
    Unknown,
}

/// Parses an address as written in X-Forwarded-For or a `for=` value: `a.b.c.d`,
/// `a.b.c.d:port`, `v6`, `[v6]`, `[v6]:port`.
fn parse_node(s: &str) -> Hop {
    let s = s.trim();
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Hop::Ip(ip);
    }
    if let Ok(sa) = s.parse::<SocketAddr>() {
        return Hop::Ip(sa.ip());
    }
    if let Some(inner) = s.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
        if let Ok(v6) = inner.parse::<Ipv6Addr>() {
            return Hop::Ip(IpAddr::V6(v6));
        }
    }
    Hop::Unknown
}

pub(super) fn xff_hops(line: &str) -> Vec<Hop> {
    line.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_node)
        .collect()
}

/// Splits on `sep` outside double-quoted strings (RFC 7230 quoted-string, with `\` escapes).
fn split_unquoted(s: &str, sep: char) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut start, mut quoted, mut escaped) = (0, false, false);
    for (i, c) in s.char_indices() {
        if escaped {
            escaped = false;
        } else if quoted && c == '\\' {
            escaped = true;
        } else if c == '"' {
            quoted = !quoted;
        } else if c == sep && !quoted {
            out.push(&s[start..i]);
            start = i + c.len_utf8();
        }
    }
    out.push(&s[start..]);
    out
}

/// RFC 7239: `for=192.0.2.60;proto=http, for="[2001:db8::17]:4711"`, one hop per element.
pub(super) fn forwarded_hops(line: &str) -> Vec<Hop> {
    split_unquoted(line, ',')
        .into_iter()
        .filter(|e| !e.trim().is_empty())
        .map(|element| {
            split_unquoted(element, ';')
                .into_iter()
                .filter_map(|pair| pair.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("for"))
                .map_or(Hop::Unknown, |(_, v)| {
                    let v = v.trim();
                    let v = v
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or(v);
                    parse_node(v)
                })
        })
        .collect()
}
