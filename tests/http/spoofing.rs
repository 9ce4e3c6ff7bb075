//! Client IPs behind trusted proxies, through a real server whose peer is 127.0.0.1.

use std::net::IpAddr;

use tollgate::http::{ClientIp, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota};

use crate::support::{get_with, serve};

/// One request per minute per client key, the key as `key` would extract it.
async fn one_per_client(key: ClientIp) -> std::net::SocketAddr {
    let limiter = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    serve(RateLimitLayer::new(Policy::new("ip", limiter, key))).await
}

async fn status(addr: std::net::SocketAddr, xff: &[&str]) -> u16 {
    let headers: Vec<(&str, &str)> = xff.iter().map(|v| ("x-forwarded-for", *v)).collect();
    get_with(addr, &headers).await.status
}

#[tokio::test]
async fn untrusted_peer_cannot_pick_its_key() {
    // The peer (127.0.0.1) is not a trusted proxy: its X-Forwarded-For is ignored, so a
    // fresh spoofed address per request does not buy a fresh budget.
    let addr = one_per_client(ClientIp::trusted_proxies(["10.0.0.0/8"]).unwrap()).await;
    assert_eq!(status(addr, &["203.0.113.1"]).await, 200);
    assert_eq!(status(addr, &["203.0.113.2"]).await, 429);
    assert_eq!(status(addr, &[]).await, 429);
    let addr = one_per_client(ClientIp::peer()).await;
    assert_eq!(status(addr, &["203.0.113.1"]).await, 200);
    assert_eq!(status(addr, &["203.0.113.2"]).await, 429);
}

#[tokio::test]
async fn two_trusted_hops_key_the_rightmost_untrusted_address() {
    let addr = one_per_client(ClientIp::trusted_proxies(["127.0.0.0/8"]).unwrap()).await;
    // client 198.51.100.7 -> proxy 127.0.0.2 -> proxy 127.0.0.1 (the peer)
    assert_eq!(
        status(addr, &["6.6.6.6, 198.51.100.7, 127.0.0.2"]).await,
        200
    );
    // The client changes the leftmost (its own) entry: still the same key.
    assert_eq!(
        status(addr, &["7.7.7.7, 198.51.100.7, 127.0.0.2"]).await,
        429
    );
    // A different client behind the same proxies has its own budget.
    assert_eq!(status(addr, &["198.51.100.8, 127.0.0.2"]).await, 200);
}

#[tokio::test]
async fn an_appended_second_line_is_the_proxys_and_wins() {
    let addr = one_per_client(ClientIp::trusted_proxies(["127.0.0.0/8"]).unwrap()).await;
    // The client sent its own line; the proxy added a second with the real address.
    assert_eq!(status(addr, &["1.1.1.1", "198.51.100.9"]).await, 200);
    assert_eq!(status(addr, &["2.2.2.2", "198.51.100.9"]).await, 429);
}

#[tokio::test]
async fn ipv6_clients_share_their_64_and_mapped_ipv4_is_ipv4() {
    let addr = one_per_client(ClientIp::trusted_proxies(["127.0.0.0/8"]).unwrap()).await;
    assert_eq!(status(addr, &["2001:db8:1:2::1"]).await, 200);
    assert_eq!(
        status(addr, &["2001:db8:1:2:ffff::9"]).await,
        429,
        "same /64"
    );
    assert_eq!(status(addr, &["2001:db8:1:3::1"]).await, 200, "next /64");
    assert_eq!(status(addr, &["::ffff:203.0.113.7"]).await, 200);
    assert_eq!(
        status(addr, &["203.0.113.7"]).await,
        429,
        "::ffff:a.b.c.d is a.b.c.d"
    );
    assert_eq!(
        status(addr, &["203.0.113.8"]).await,
        200,
        "its neighbour is not"
    );
}

#[tokio::test]
async fn forwarded_header_when_configured() {
    let addr = one_per_client(
        ClientIp::trusted_proxies(["127.0.0.0/8"])
            .unwrap()
            .use_forwarded(),
    )
    .await;
    let fwd = |v: &'static str| [("forwarded", v)];
    assert_eq!(
        get_with(addr, &fwd("for=6.6.6.6, for=\"[2001:db8:cafe::17]:4711\""))
            .await
            .status,
        200
    );
    assert_eq!(
        get_with(addr, &fwd("for=\"[2001:db8:cafe::18]\""))
            .await
            .status,
        429,
        "same /64"
    );
    // X-Forwarded-For is not what these proxies write: a client's copy is ignored.
    assert_eq!(
        status(addr, &["198.51.100.1"]).await,
        200,
        "keyed by the peer"
    );
    assert_eq!(status(addr, &["198.51.100.2"]).await, 429, "still the peer");
}
