//! 429s, headers, Retry-After, all-or-nothing, shadow mode and costs through a real axum server.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tollgate::http::{ClientIp, Global, HeaderKey, MissingKey, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

use crate::support::{get_with, parse_list, send, serve, serve_app};

fn per_ip(quota: Quota) -> KeyedRateLimiter<IpAddr> {
    KeyedRateLimiter::builder(Algorithm::FixedWindow, quota)
        .build()
        .unwrap()
}

#[tokio::test]
async fn quota_then_429_with_ietf_headers_and_problem_body() {
    let addr = serve(RateLimitLayer::new(Policy::new(
        "ip",
        per_ip(Quota::per_minute(3)),
        ClientIp::peer(),
    )))
    .await;
    for left in (0..3).rev() {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.body, "ok");
        let policy = parse_list(r.header("ratelimit-policy").unwrap());
        assert_eq!(policy.len(), 1);
        assert_eq!(policy[0].name, "ip");
        assert_eq!(policy[0].param("q"), 3);
        assert_eq!(policy[0].param("w"), 60);
        let rl = parse_list(r.header("ratelimit").unwrap());
        assert_eq!(rl[0].name, "ip");
        assert_eq!(rl[0].param("r"), left);
        assert!((1..=60).contains(&rl[0].param("t")), "{:?}", rl[0]);
        assert!(r.header("retry-after").is_none());
        assert!(
            r.header("x-ratelimit-limit").is_none(),
            "legacy fields only when asked for"
        );
    }
    let r = get_with(addr, &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.body
            .contains(r#""type":"https://iana.org/assignments/http-problem-types#quota-exceeded""#),
        "{}",
        r.body
    );
    assert!(
        r.body.contains(r#""violated-policies":["ip"]"#),
        "{}",
        r.body
    );
    assert!(r.body.contains(r#""status":429"#), "{}", r.body);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    let rl = parse_list(r.header("ratelimit").unwrap());
    assert_eq!(rl[0].param("r"), 0);
    let t = rl[0].param("t") as u64;
    assert!(
        retry >= 1 && retry >= t && retry <= 60,
        "retry {retry}, t {t}"
    );
    assert_eq!(
        parse_list(r.header("ratelimit-policy").unwrap())[0].param("q"),
        3
    );
}

#[tokio::test]
async fn q_is_the_quota_limit_not_the_burst_and_legacy_fields_on_request() {
    let bucket = KeyedRateLimiter::<IpAddr>::builder(
        Algorithm::TokenBucket,
        Quota::per_second(10).with_burst(2),
    )
    .build()
    .unwrap();
    let layer =
        RateLimitLayer::new(Policy::new("ip", bucket, ClientIp::peer())).legacy_headers(true);
    let addr = serve(layer).await;
    let r = get_with(addr, &[]).await;
    let policy = parse_list(r.header("ratelimit-policy").unwrap());
    assert_eq!((policy[0].param("q"), policy[0].param("w")), (10, 1));
    assert_eq!(r.header("x-ratelimit-limit"), Some("10"));
    assert_eq!(r.header("x-ratelimit-remaining"), Some("1"));
    assert!(r.header("x-ratelimit-reset").is_some());
}

#[tokio::test]
async fn retry_after_is_whole_seconds_rounded_up_and_waiting_it_admits() {
    // One request per 1.2 s: the wait after a request is 1.2 s, which must read 2, never 1
    // (early) or 0 (a sub-second wait rounded down).
    let bucket = RateLimiter::builder(
        Algorithm::TokenBucket,
        Quota::new(1, Duration::from_millis(1200)),
    )
    .build()
    .unwrap();
    let addr = serve(RateLimitLayer::new(Policy::new("g", bucket, Global))).await;
    assert_eq!(get_with(addr, &[]).await.status, 200);
    let r = get_with(addr, &[]).await;
    let asked = Instant::now();
    assert_eq!(r.status, 429);
    let retry: u64 = r.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry, 2);
    tokio::time::sleep(Duration::from_secs(retry).saturating_sub(asked.elapsed())).await;
    assert_eq!(
        get_with(addr, &[]).await.status,
        200,
        "waiting Retry-After admits the request"
    );
}

#[tokio::test]
async fn sub_second_wait_reads_one_second_never_zero() {
    let bucket = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(20).with_burst(1))
        .build()
        .unwrap();
    let addr = serve(RateLimitLayer::new(Policy::new("g", bucket, Global))).await;
    assert_eq!(get_with(addr, &[]).await.status, 200);
    let r = get_with(addr, &[]).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    assert_eq!(parse_list(r.header("ratelimit").unwrap())[0].param("t"), 1);
}

#[tokio::test]
async fn two_policies_are_all_or_nothing() {
    // The global policy comes first: a request the per-key policy denies must not have
    // consumed any of the global budget.
    let global = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3))
        .build()
        .unwrap();
    let per_key = KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(Policy::new("global", global, Global)).policy(Policy::new(
        "key",
        per_key,
        HeaderKey::new("x-api-key").unwrap(),
    ));
    let addr = serve(layer).await;
    assert_eq!(get_with(addr, &[("x-api-key", "a")]).await.status, 200);
    for _ in 0..3 {
        let r = get_with(addr, &[("x-api-key", "a")]).await;
        assert_eq!(r.status, 429);
        assert!(
            r.body.contains(r#""violated-policies":["key"]"#),
            "{}",
            r.body
        );
    }
    let r = get_with(addr, &[("x-api-key", "b")]).await;
    assert_eq!(r.status, 200);
    let rl = parse_list(r.header("ratelimit").unwrap());
    assert_eq!((rl[0].name.as_str(), rl[0].param("r")), ("global", 1));
    assert_eq!((rl[1].name.as_str(), rl[1].param("r")), ("key", 0));
    assert_eq!(get_with(addr, &[("x-api-key", "c")]).await.status, 200);
    let r = get_with(addr, &[("x-api-key", "d")]).await;
    assert_eq!(r.status, 429);
    assert!(
        r.body.contains(r#""violated-policies":["global"]"#),
        "{}",
        r.body
    );
}

/// README, Middleware, Policies: "The policies of one layer are all-or-nothing: a
/// request one of them denies consumes nothing from the others. Stacked layers are not:
/// a request an inner layer denies has been counted by the layers outside it." Both
/// halves, with the same two limits: "outer" (3 a minute, global) and "inner" (1 a
/// minute, per API key).
#[tokio::test]
async fn all_or_nothing_holds_for_one_layers_policies_not_for_stacked_layers() {
    let limits = || {
        let outer = Arc::new(
            RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(3))
                .build()
                .unwrap(),
        );
        let inner =
            KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(1))
                .build()
                .unwrap();
        let outer_policy = Policy::new("outer", Arc::clone(&outer), Global);
        let inner_policy = Policy::new("inner", inner, HeaderKey::new("x-api-key").unwrap());
        (outer, outer_policy, inner_policy)
    };
    let key = [("x-api-key", "a")];

    // One layer, two policies: the second denies, the first keeps what it had.
    let (outer, outer_policy, inner_policy) = limits();
    let addr = serve(RateLimitLayer::new(outer_policy).policy(inner_policy)).await;
    assert_eq!(get_with(addr, &key).await.status, 200);
    assert_eq!(outer.peek_n(0).unwrap().remaining(), 2);
    for _ in 0..3 {
        let r = get_with(addr, &key).await;
        assert_eq!(r.status, 429);
        assert!(
            r.body.contains(r#""violated-policies":["inner"]"#),
            "{}",
            r.body
        );
    }
    assert_eq!(
        outer.peek_n(0).unwrap().remaining(),
        2,
        "a request one policy of the layer denies takes nothing from the others"
    );

    // The same limits in two stacked layers: each request the inner layer denies has
    // already been counted by the outer one, until the outer denies too.
    let (outer, outer_policy, inner_policy) = limits();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async { "ok" }).layer(RateLimitLayer::new(inner_policy)),
        )
        .layer(RateLimitLayer::new(outer_policy));
    let addr = serve_app(app).await;
    assert_eq!(get_with(addr, &key).await.status, 200);
    for left in [1, 0] {
        let r = get_with(addr, &key).await;
        assert_eq!(r.status, 429);
        assert!(
            r.body.contains(r#""violated-policies":["inner"]"#),
            "{}",
            r.body
        );
        assert_eq!(
            outer.peek_n(0).unwrap().remaining(),
            left,
            "the outer layer counted a request the inner one denied"
        );
    }
    let r = get_with(addr, &key).await;
    assert_eq!(r.status, 429);
    assert!(
        r.body.contains(r#""violated-policies":["outer"]"#),
        "{}",
        r.body
    );
    // Another key, which the inner layer would admit, finds the outer limit spent.
    let r = get_with(addr, &[("x-api-key", "b")]).await;
    assert_eq!(r.status, 429);
    assert!(
        r.body.contains(r#""violated-policies":["outer"]"#),
        "{}",
        r.body
    );
}

/// The first request's peer, as the per-IP limiters key it.
const LOCAL: IpAddr = IpAddr::V4(std::net::Ipv4Addr::LOCALHOST);

#[tokio::test]
async fn a_shadow_policy_never_enforces_and_tells_clients_nothing_by_default() {
    // A client that read a shadow policy's `r=0` would back off from a limit nobody
    // enforces: by default none of the rate-limit fields name it.
    let trial = Arc::new(per_ip(Quota::per_minute(1)));
    let addr = serve(
        RateLimitLayer::new(Policy::new(
            "ip",
            per_ip(Quota::per_minute(5)),
            ClientIp::peer(),
        ))
        .policy(Policy::new("trial", Arc::clone(&trial), ClientIp::peer()).shadow())
        .legacy_headers(true),
    )
    .await;
    for ip_left in [4, 3, 2] {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 200, "a shadow policy never refuses");
        let names = |field| -> Vec<String> {
            parse_list(r.header(field).unwrap())
                .into_iter()
                .map(|i| i.name)
                .collect()
        };
        assert_eq!(names("ratelimit-policy"), ["ip"]);
        assert_eq!(names("ratelimit"), ["ip"]);
        assert_eq!(
            parse_list(r.header("ratelimit").unwrap())[0].param("r"),
            ip_left
        );
        // The legacy trio is the most constrained policy shown, not the shadow's 0.
        assert_eq!(r.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            r.header("x-ratelimit-remaining"),
            Some(ip_left.to_string().as_str())
        );
    }
    // It did decide: its one request a minute is spent.
    assert!(!trial.peek(&LOCAL).is_allowed());

    // A layer of only a shadow policy adds no field at all.
    let addr = serve(RateLimitLayer::new(
        Policy::new("trial", per_ip(Quota::per_minute(1)), ClientIp::peer()).shadow(),
    ))
    .await;
    for _ in 0..2 {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 200);
        for field in ["ratelimit-policy", "ratelimit", "x-ratelimit-remaining"] {
            assert!(r.header(field).is_none(), "{field}: {:?}", r.header(field));
        }
    }
}

#[tokio::test]
async fn shadow_headers_opt_in_reports_the_shadow_decisions_but_never_enforces() {
    let addr = serve(
        RateLimitLayer::new(
            Policy::new("trial", per_ip(Quota::per_minute(1)), ClientIp::peer())
                .shadow()
                .shadow_headers(true),
        )
        .legacy_headers(true),
    )
    .await;
    for left in [0, 0, 0] {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 200);
        let rl = parse_list(r.header("ratelimit").unwrap());
        assert_eq!((rl[0].name.as_str(), rl[0].param("r")), ("trial", left));
        let policy = parse_list(r.header("ratelimit-policy").unwrap());
        assert_eq!(
            (policy[0].name.as_str(), policy[0].param("q")),
            ("trial", 1)
        );
        assert_eq!(r.header("x-ratelimit-remaining"), Some("0"));
    }
}

#[tokio::test]
async fn missing_key_skips_or_rejects_when_configured() {
    // The default (fail closed) is tested in missing_key.rs.
    let per_key = KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let skip = Policy::new("key", per_key, HeaderKey::new("x-api-key").unwrap())
        .on_missing_key(MissingKey::Skip);
    let addr = serve(RateLimitLayer::new(skip.clone())).await;
    for _ in 0..3 {
        let r = get_with(addr, &[]).await;
        assert_eq!(r.status, 200);
        assert!(r.header("ratelimit").is_none());
    }
    assert_eq!(skip.missing_keys(), 3);
    let addr = serve(RateLimitLayer::new(
        skip.on_missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED)),
    ))
    .await;
    let r = get_with(addr, &[]).await;
    assert_eq!(r.status, 401);
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
}

#[tokio::test]
async fn byte_quota_costs_content_length_and_too_large_never_fits() {
    let bytes = per_ip(Quota::per_minute(100));
    let policy = Policy::new("bytes", bytes, ClientIp::peer()).cost_from_content_length(100);
    let addr = serve(RateLimitLayer::new(policy)).await;
    let sixty = "x".repeat(60).leak();
    let r = send(addr, "POST", "/upload", &[], sixty).await;
    assert_eq!((r.status, r.body.as_str()), (200, "stored"));
    assert_eq!(parse_list(r.header("ratelimit").unwrap())[0].param("r"), 40);
    let r = send(addr, "POST", "/upload", &[], sixty).await;
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_some());
    // 200 bytes can never fit a 100-byte window: denied, and no Retry-After to wait for.
    let r = send(addr, "POST", "/upload", &[], "y".repeat(200).leak()).await;
    assert_eq!(r.status, 429);
    assert!(r.header("retry-after").is_none());
    assert!(r.body.contains("never"), "{}", r.body);
}

#[tokio::test]
async fn nested_layers_join_their_list_members() {
    let inner = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1))
        .build()
        .unwrap();
    let outer = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5))
        .build()
        .unwrap();
    let app = axum::Router::new()
        .route(
            "/",
            axum::routing::get(|| async { "ok" })
                .layer(RateLimitLayer::new(Policy::new("inner", inner, Global))),
        )
        .layer(RateLimitLayer::new(Policy::new("outer", outer, Global)));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    let r = get_with(addr, &[]).await;
    let names: Vec<String> = parse_list(r.header("ratelimit-policy").unwrap())
        .into_iter()
        .map(|i| i.name)
        .collect();
    assert_eq!(names, ["inner", "outer"]);
    let r = get_with(addr, &[]).await;
    assert_eq!(r.status, 429);
    let rl = parse_list(r.header("ratelimit").unwrap());
    assert_eq!((rl[0].name.as_str(), rl[0].param("r")), ("inner", 0));
    assert_eq!((rl[1].name.as_str(), rl[1].param("r")), ("outer", 3));
}
