//! Address arithmetic: an address cut to its first `prefix` bits (a CIDR's network, an
//! IPv6 client's /64 key), and IPv4-mapped IPv6 turned into the IPv4 address it carries.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `ip` with every bit after the first `prefix` cleared.
pub(super) fn mask_v4(ip: Ipv4Addr, prefix: u8) -> Ipv4Addr {
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

pub(super) fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(mask_v4(v4, prefix.min(32))),
        IpAddr::V6(v6) => IpAddr::V6(mask_v6(v6, prefix.min(128))),
    }
}

/// IPv4-mapped IPv6 (`::ffff:a.b.c.d`) becomes the IPv4 address it carries; anything
/// else is unchanged. Done before every other step, so an IPv4 client has one key
/// whichever socket family it arrived on.
pub(super) fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    }
}
