//! The client's IP address: the peer, or behind trusted proxies the rightmost address
//! they did not add themselves.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::header::{HeaderName, FORWARDED};
use http::request::Parts;

use super::key::KeyExtractor;

/// The peer address of a connection, for servers that do not record one themselves.
///
/// The layer looks for the peer in the request's extensions: this type, axum's
/// `ConnectInfo<SocketAddr>` (feature `axum`), or tonic's `TcpConnectInfo` (feature
/// `tonic`). A plain hyper server inserts it per connection:
///
/// ```no_run
/// # #[cfg(feature = "axum")]
/// # async fn serve() -> std::io::Result<()> {
/// use std::convert::Infallible;
/// use tollgate::http::PeerAddr;
///
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// loop {
///     let (stream, peer) = listener.accept().await?;
///     let svc = hyper::service::service_fn(move |mut req: http::Request<hyper::body::Incoming>| {
///         req.extensions_mut().insert(PeerAddr(peer));
///         // ... then call the service wrapped in RateLimitLayer with `req`
///         async move { Ok::<_, Infallible>(http::Response::new(String::from("ok"))) }
///     });
///     tokio::spawn(hyper::server::conn::http1::Builder::new()
///         .serve_connection(hyper_util::rt::TokioIo::new(stream), svc));
/// }
/// # }
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PeerAddr(pub SocketAddr);

/// A malformed CIDR given to [`ClientIp::trusted_proxies`].
///
/// # Example
///
/// ```
/// let e = tollgate::http::ClientIp::trusted_proxies(["10.0.0.0/33"]).unwrap_err();
/// assert_eq!(e.to_string(), "invalid CIDR \"10.0.0.0/33\": prefix longer than 32 bits");
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CidrError {
    input: String,
    reason: &'static str,
}

impl fmt::Display for CidrError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid CIDR {:?}: {}", self.input, self.reason)
    }
}

impl std::error::Error for CidrError {}

/// One network: an address and a prefix length, IPv4-mapped IPv6 stored as IPv4.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    fn parse(s: &str) -> Result<Cidr, CidrError> {
        let err = |reason| CidrError {
            input: s.to_owned(),
            reason,
        };
        let (ip, prefix) = match s.trim().split_once('/') {
            Some((ip, p)) => (ip, Some(p)),
            None => (s.trim(), None),
        };
        let ip: IpAddr = ip.parse().map_err(|_| err("not an IP address"))?;
        let max = if ip.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            Some(p) => p.parse::<u8>().map_err(|_| err("prefix is not a number"))?,
            None => max,
        };
        if prefix > max {
            return Err(err(if max == 32 {
                "prefix longer than 32 bits"
            } else {
                "prefix longer than 128 bits"
            }));
        }
        // ::ffff:a.b.c.d/n is the IPv4 network a.b.c.d/(n - 96).
        if let IpAddr::V6(v6) = ip {
            if let Some(v4) = v6.to_ipv4_mapped() {
                if prefix >= 96 {
                    return Ok(Cidr {
                        addr: IpAddr::V4(mask_v4(v4, prefix - 96)),
                        prefix: prefix - 96,
                    });
                }
            }
        }
        Ok(Cidr {
            addr: mask(ip, prefix),
            prefix,
        })
    }

    fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.prefix) == self.addr
            }
            _ => false,
        }
    }
}

fn mask_v4(ip: Ipv4Addr, prefix: u8) -> Ipv4Addr {
    let bits = u32::from(ip);
    let m = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(prefix))
    };
    Ipv4Addr::from(bits & m)
}

fn mask_v6(ip: Ipv6Addr, prefix: u8) -> Ipv6Addr {
    let bits = u128::from(ip);
    let m = if prefix == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(prefix))
    };
    Ipv6Addr::from(bits & m)
}

fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(mask_v4(v4, prefix.min(32))),
        IpAddr::V6(v6) => IpAddr::V6(mask_v6(v6, prefix.min(128))),
    }
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) becomes the IPv4 address it carries; anything
/// else is unchanged. Done before every other step, so an IPv4 client has one key
/// whichever socket family it arrived on.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}

/// Which forwarding header the trusted proxies write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    XForwardedFor,
    Forwarded,
}

/// The client IP address as a key (`IpAddr`).
///
/// - [`ClientIp::peer()`]: the connection's peer; every forwarding header is ignored.
/// - [`ClientIp::trusted_proxies(cidrs)`](ClientIp::trusted_proxies): when the peer is in
///   one of `cidrs`, the rightmost address in `X-Forwarded-For` (all lines, joined in
///   order) that is not itself in `cidrs`; [`use_forwarded`](ClientIp::use_forwarded) reads
///   RFC 7239 `Forwarded` instead. A peer outside `cidrs` is the client, whatever the
///   headers say. Read only the header your proxies write: a header they pass through
///   untouched is the client's to choose.
///
/// IPv4-mapped IPv6 is turned into IPv4 first; IPv6 clients are keyed by their /64
/// (one subscriber's allocation), see [`ipv6_prefix`](ClientIp::ipv6_prefix).
///
/// No key (the policy's [`MissingKey`](super::MissingKey) outcome) when the peer address
/// is unknown, or when the address the rule selects is `unknown`, obfuscated or not an IP
/// address: the layer never falls back to an address further left, which the client
/// could have written.
///
/// # Example
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::http::{ClientIp, KeyExtractor, PeerAddr};
///
/// let behind_lb = ClientIp::trusted_proxies(["10.0.0.0/8"])?;
/// let mut req = http::Request::get("/")
///     .header("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.0.0.2")
///     .body(())?;
/// req.extensions_mut().insert(PeerAddr("10.0.0.1:4000".parse()?));
/// let (parts, ()) = req.into_parts();
/// assert_eq!(behind_lb.extract(&parts), Some("203.0.113.7".parse::<IpAddr>()?));
/// assert_eq!(ClientIp::peer().extract(&parts), Some("10.0.0.1".parse::<IpAddr>()?));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct ClientIp {
    trusted: Vec<Cidr>,
    source: Source,
    v6_prefix: u8,
}

impl ClientIp {
    /// The connection's peer address; forwarding headers are ignored.
    ///
    /// # Example
    ///
    /// ```
    /// let key = tollgate::http::ClientIp::peer();
    /// # let _ = key;
    /// ```
    #[must_use]
    pub fn peer() -> Self {
        ClientIp {
            trusted: Vec::new(),
            source: Source::XForwardedFor,
            v6_prefix: 64,
        }
    }

    /// Trusts the proxies in `cidrs` (`"10.0.0.0/8"`, `"fd00::/8"`, or a single address).
    ///
    /// # Errors
    ///
    /// [`CidrError`] for an entry that is not an address with an optional prefix no
    /// longer than the address.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::ClientIp;
    ///
    /// let trusted = ClientIp::trusted_proxies(["10.0.0.0/8", "127.0.0.1/32", "::1"])?;
    /// assert!(ClientIp::trusted_proxies(["10.0.0/8"]).is_err());
    /// # let _ = trusted;
    /// # Ok::<(), tollgate::http::CidrError>(())
    /// ```
    pub fn trusted_proxies<I, S>(cidrs: I) -> Result<Self, CidrError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let trusted = cidrs
            .into_iter()
            .map(|c| Cidr::parse(c.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ClientIp {
            trusted,
            ..ClientIp::peer()
        })
    }

    /// Reads RFC 7239 `Forwarded` (its `for=` parameters) instead of `X-Forwarded-For`.
    ///
    /// # Example
    ///
    /// ```
    /// let key = tollgate::http::ClientIp::trusted_proxies(["10.0.0.0/8"])?.use_forwarded();
    /// # let _ = key;
    /// # Ok::<(), tollgate::http::CidrError>(())
    /// ```
    #[must_use]
    pub fn use_forwarded(mut self) -> Self {
        self.source = Source::Forwarded;
        self
    }

    /// Keys IPv6 clients by their first `bits` bits (default 64; 128 keys every address
    /// apart; values above 128 are taken as 128).
    ///
    /// # Example
    ///
    /// ```
    /// let per_56 = tollgate::http::ClientIp::peer().ipv6_prefix(56);
    /// # let _ = per_56;
    /// ```
    #[must_use]
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.v6_prefix = bits.min(128);
        self
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|c| c.contains(ip))
    }

    fn key_of(&self, ip: IpAddr) -> IpAddr {
        match ip {
            IpAddr::V6(_) => mask(ip, self.v6_prefix),
            v4 => v4,
        }
    }

    /// The client address before /64 grouping, or `None` when it cannot be told.
    fn client(&self, parts: &Parts) -> Option<IpAddr> {
        let peer = canonical(peer_addr(parts)?);
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let (name, parse): (HeaderName, fn(&str) -> Vec<Hop>) = match self.source {
            Source::XForwardedFor => (HeaderName::from_static("x-forwarded-for"), xff_hops),
            Source::Forwarded => (FORWARDED, forwarded_hops),
        };
        let mut hops = Vec::new();
        for line in parts.headers.get_all(name) {
            // A line that is not visible ASCII cannot be split reliably: nothing left of
            // it can be trusted, and the hops on its right were parsed from earlier lines.
            let Ok(line) = line.to_str() else {
                hops.push(Hop::Unknown);
                continue;
            };
            hops.extend(parse(line));
        }
        let mut client = peer;
        for hop in hops.iter().rev() {
            match hop {
                Hop::Ip(ip) => {
                    client = canonical(*ip);
                    if !self.is_trusted(client) {
                        return Some(client);
                    }
                }
                Hop::Unknown => return None,
            }
        }
        // Every hop is a trusted proxy: the request started inside; the leftmost is its origin.
        Some(client)
    }
}

impl KeyExtractor for ClientIp {
    type Key = IpAddr;

    fn extract(&self, parts: &Parts) -> Option<IpAddr> {
        self.client(parts).map(|ip| self.key_of(ip))
    }

    fn missing_reason(&self, parts: &Parts) -> String {
        let Some(peer) = peer_addr(parts) else {
            return NO_PEER.to_owned();
        };
        let header = match self.source {
            Source::XForwardedFor => "X-Forwarded-For",
            Source::Forwarded => "Forwarded",
        };
        format!(
            "the client address selected in {header} (behind the trusted proxy {peer}) is \
             `unknown`, obfuscated or not an IP address"
        )
    }
}

// What this build reads, for the message below.
#[cfg(feature = "axum")]
macro_rules! no_axum {
    () => {
        ""
    };
}
#[cfg(not(feature = "axum"))]
macro_rules! no_axum {
    () => {
        " (and this build of tollgate reads ConnectInfo only with its `axum` feature)"
    };
}
#[cfg(feature = "tonic")]
macro_rules! tonic_peer {
    () => {
        "its server records TcpConnectInfo for plain TCP connections (not for TLS or a \
         custom incoming stream)"
    };
}
#[cfg(not(feature = "tonic"))]
macro_rules! tonic_peer {
    () => {
        "this build of tollgate reads TcpConnectInfo only with its `tonic` feature"
    };
}

/// Why a request has no peer address, and what records one (what this build reads).
const NO_PEER: &str = concat!(
    "no peer address was found for the request (ClientIp keys by the connection's peer, ",
    "read from the request's extensions); ",
    "axum: serve the app with `into_make_service_with_connect_info::<SocketAddr>()`, ",
    "plain `axum::serve(listener, app)` records no ConnectInfo",
    no_axum!(),
    "; tonic: ",
    tonic_peer!(),
    "; any other server: insert `tollgate::http::PeerAddr` into each request's extensions",
);

/// The connection's peer, from whichever server recorded it.
pub(crate) fn peer_addr(parts: &Parts) -> Option<IpAddr> {
    #[cfg(feature = "axum")]
    if let Some(axum::extract::ConnectInfo(a)) = parts
        .extensions
        .get::<axum::extract::ConnectInfo<SocketAddr>>()
    {
        return Some(a.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(info) = parts
        .extensions
        .get::<tonic::transport::server::TcpConnectInfo>()
    {
        if let Some(a) = info.remote_addr() {
            return Some(a.ip());
        }
    }
    if let Some(PeerAddr(a)) = parts.extensions.get::<PeerAddr>() {
        return Some(a.ip());
    }
    None
}

/// One entry of a forwarding header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hop {
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

fn xff_hops(line: &str) -> Vec<Hop> {
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
fn forwarded_hops(line: &str) -> Vec<Hop> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(peer: &str, headers: &[(&str, &str)]) -> Parts {
        let mut b = http::Request::get("/");
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        let mut req = b.body(()).unwrap();
        req.extensions_mut()
            .insert(PeerAddr(SocketAddr::new(peer.parse().unwrap(), 1)));
        req.into_parts().0
    }

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn untrusted_peer_ignores_headers() {
        let k = ClientIp::trusted_proxies(["10.0.0.0/8"]).unwrap();
        let p = parts("198.51.100.1", &[("x-forwarded-for", "1.1.1.1")]);
        assert_eq!(k.extract(&p), ip("198.51.100.1"));
        assert_eq!(ClientIp::peer().extract(&p), ip("198.51.100.1"));
    }

    #[test]
    fn rightmost_untrusted_over_all_lines() {
        let k = ClientIp::trusted_proxies(["10.0.0.0/8"]).unwrap();
        // Two trusted hops.
        let p = parts(
            "10.0.0.1",
            &[("x-forwarded-for", "6.6.6.6, 203.0.113.7, 10.1.1.1")],
        );
        assert_eq!(k.extract(&p), ip("203.0.113.7"));
        // An appended second line is the proxy's: it wins over the client's first line.
        let p = parts(
            "10.0.0.1",
            &[
                ("x-forwarded-for", "6.6.6.6"),
                ("x-forwarded-for", "203.0.113.9"),
            ],
        );
        assert_eq!(k.extract(&p), ip("203.0.113.9"));
        // Garbage at the selected position gives no key, never the address left of it.
        let p = parts("10.0.0.1", &[("x-forwarded-for", "6.6.6.6, nonsense")]);
        assert_eq!(k.extract(&p), None);
        // Only trusted hops: the leftmost.
        let p = parts("10.0.0.1", &[("x-forwarded-for", "10.9.9.9, 10.1.1.1")]);
        assert_eq!(k.extract(&p), ip("10.9.9.9"));
        // No header: the proxy itself.
        assert_eq!(k.extract(&parts("10.0.0.1", &[])), ip("10.0.0.1"));
    }

    #[test]
    fn ipv4_mapped_is_ipv4_and_v6_grouped_by_64() {
        let k = ClientIp::trusted_proxies(["10.0.0.0/8"]).unwrap();
        assert_eq!(
            k.extract(&parts("::ffff:203.0.113.7", &[])),
            ip("203.0.113.7")
        );
        assert_eq!(
            k.extract(&parts(
                "::ffff:10.0.0.1",
                &[("x-forwarded-for", "::ffff:1.2.3.4")]
            )),
            ip("1.2.3.4")
        );
        assert_eq!(
            k.extract(&parts("2001:db8:1:2:aaaa::1", &[])),
            ip("2001:db8:1:2::")
        );
        assert_eq!(
            k.clone()
                .ipv6_prefix(128)
                .extract(&parts("2001:db8:1:2:aaaa::1", &[])),
            ip("2001:db8:1:2:aaaa::1")
        );
        let mapped = ClientIp::trusted_proxies(["::ffff:10.0.0.0/104"]).unwrap();
        assert_eq!(
            mapped.extract(&parts("10.2.3.4", &[("x-forwarded-for", "5.5.5.5")])),
            ip("5.5.5.5")
        );
    }

    #[test]
    fn forwarded_header() {
        let k = ClientIp::trusted_proxies(["10.0.0.0/8", "2001:db8:ffff::/48"])
            .unwrap()
            .use_forwarded();
        let p = parts(
            "10.0.0.1",
            &[("forwarded", "for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, For=\"[2001:db8:ffff::1]\"")],
        );
        assert_eq!(k.extract(&p), ip("2001:db8:cafe::"));
        let p = parts(
            "10.0.0.1",
            &[("forwarded", "for=\"203.0.113.4:80\";by=10.0.0.1")],
        );
        assert_eq!(k.extract(&p), ip("203.0.113.4"));
        let p = parts("10.0.0.1", &[("forwarded", "for=6.6.6.6, for=unknown")]);
        assert_eq!(k.extract(&p), None);
        let p = parts("10.0.0.1", &[("forwarded", "for=6.6.6.6, for=_hidden")]);
        assert_eq!(k.extract(&p), None);
        let p = parts("10.0.0.1", &[("forwarded", "proto=http;by=\"a,b\"")]);
        assert_eq!(k.extract(&p), None);
        // XFF is ignored when Forwarded is configured.
        let p = parts("10.0.0.1", &[("x-forwarded-for", "7.7.7.7")]);
        assert_eq!(k.extract(&p), ip("10.0.0.1"));
    }

    #[test]
    fn cidr_errors() {
        for bad in ["10.0.0.0/33", "::/129", "10.0.0/8", "x", "10.0.0.0/a"] {
            assert!(ClientIp::trusted_proxies([bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn no_peer_no_key() {
        let (p, ()) = http::Request::get("/").body(()).unwrap().into_parts();
        assert_eq!(ClientIp::peer().extract(&p), None);
        let why = ClientIp::peer().missing_reason(&p);
        assert!(why.starts_with("no peer address was found"), "{why}");
        assert!(
            why.contains("into_make_service_with_connect_info::<SocketAddr>()"),
            "{why}"
        );
        assert!(
            why.contains("TcpConnectInfo") && why.contains("PeerAddr"),
            "{why}"
        );
    }

    #[test]
    fn an_unknown_forwarded_client_is_named_as_such() {
        let k = ClientIp::trusted_proxies(["10.0.0.0/8"]).unwrap();
        let p = parts("10.0.0.1", &[("x-forwarded-for", "6.6.6.6, unknown")]);
        assert_eq!(k.extract(&p), None);
        let why = k.missing_reason(&p);
        assert!(
            why.contains("X-Forwarded-For")
                && why.contains("10.0.0.1")
                && why.contains("`unknown`"),
            "{why}"
        );
        assert!(k
            .use_forwarded()
            .missing_reason(&parts("10.0.0.1", &[("forwarded", "for=_x")]))
            .contains("in Forwarded"));
    }
}
