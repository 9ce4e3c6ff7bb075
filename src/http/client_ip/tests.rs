//! The client-IP rules against forged, chained and malformed forwarding headers.

use std::net::SocketAddr;

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
        &[(
            "forwarded",
            "for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\";proto=https, For=\"[2001:db8:ffff::1]\"",
        )],
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
        why.contains("X-Forwarded-For") && why.contains("10.0.0.1") && why.contains("`unknown`"),
        "{why}"
    );
    assert!(k
        .use_forwarded()
        .missing_reason(&parts("10.0.0.1", &[("forwarded", "for=_x")]))
        .contains("in Forwarded"));
}
