//! The client's IP address: the peer, or behind trusted proxies the rightmost address
//! they did not add themselves.
//!
//! [`ClientIp`] (this file) decides which address is the client's; `cidr` parses the
//! trusted-proxy networks, `forwarded` the forwarding headers (`X-Forwarded-For`, RFC 7239
//! `Forwarded`), `prefix` masks addresses (IPv6 clients keyed by their /64) and
//! canonicalizes IPv4-mapped IPv6, and `peer` finds the connection's peer address.

mod cidr;
mod forwarded;
mod peer;
mod prefix;
#[cfg(test)]
mod tests;

use std::net::IpAddr;

use http::header::{HeaderName, FORWARDED};
use http::request::Parts;

use super::key::KeyExtractor;
use cidr::Cidr;
pub use cidr::CidrError;
use forwarded::{forwarded_hops, xff_hops, Hop};
pub use peer::PeerAddr;
use peer::{peer_addr, NO_PEER};
use prefix::{canonical, mask};

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
