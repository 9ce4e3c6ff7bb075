//! Trusted-proxy networks: parsing a CIDR (`10.0.0.0/8`, `fd00::/8`, a single address)
//! and testing an address against it.

use std::fmt;
use std::net::IpAddr;

use super::prefix::{mask, mask_v4};

/// A malformed CIDR given to [`ClientIp::trusted_proxies`](super::ClientIp::trusted_proxies).
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
pub(super) struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    pub(super) fn parse(s: &str) -> Result<Cidr, CidrError> {
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

    pub(super) fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(_), IpAddr::V4(_)) | (IpAddr::V6(_), IpAddr::V6(_)) => {
                mask(ip, self.prefix) == self.addr
            }
            _ => false,
        }
    }
}
