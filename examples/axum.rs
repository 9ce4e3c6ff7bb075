//! An axum service with four rate limits in two layers:
//!
//! - a layer on every route, whose three policies are all-or-nothing (a request one of
//!   them denies takes nothing from the other two):
//!   - per client IP, behind a trusted reverse proxy on 127.0.0.1 (so `X-Forwarded-For`
//!     from it is believed, and from anyone else ignored): 5 requests a minute;
//!   - per API key (`x-api-key`; requests without one are refused with 401): 10 a second;
//!   - global: 100 a second for the whole service;
//! - a layer on `/upload` only: a byte quota of 64 KiB a minute per client, the request's
//!   `Content-Length`. It is stacked inside the first, so an upload it refuses has been
//!   counted by the first layer's policies all the same.
//!
//! Run it and try the printed curl lines, in order, on a fresh server (curl 7.84 or later,
//! for `%header{..}`). Each prints the body, the status and the `RateLimit` field of
//! every response, and says which status it gets and which policy refuses it (named in
//! the problem+json body's `violated-policies`). `tests/http/example_axum.rs` sends the
//! same requests to this router and checks every claim.
//!
//! ```text
//! cargo run --example axum --features axum
//! ```

use std::net::{IpAddr, SocketAddr};

use axum::http::StatusCode;
use axum::routing::{get, post};
use tollgate::http::{ClientIp, Global, HeaderKey, MissingKey, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

/// The service: `GET /` and `POST /upload` behind the limits above.
pub(crate) fn app() -> Result<axum::Router, Box<dyn std::error::Error>> {
    // Behind a proxy on this machine: trust it, and key by the address it reports.
    let client_ip = ClientIp::trusted_proxies(["127.0.0.1/32", "::1/128"])?;

    let per_ip =
        KeyedRateLimiter::<IpAddr>::builder(Algorithm::SlidingWindow, Quota::per_minute(5))
            .max_keys(100_000)
            .build()?;
    let per_key =
        KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(10))
            .build()?;
    let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    let upload_bytes =
        KeyedRateLimiter::<IpAddr>::builder(Algorithm::TokenBucket, Quota::per_minute(64 << 10))
            .build()?;

    let limits = RateLimitLayer::new(Policy::new("ip", per_ip, client_ip.clone()))
        .policy(
            Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?)
                .on_missing_key(MissingKey::Reject(StatusCode::UNAUTHORIZED)),
        )
        .policy(Policy::new("global", global, Global));
    let uploads = RateLimitLayer::new(
        // An upload without a declared length counts as 16 KiB.
        Policy::new("upload-bytes", upload_bytes, client_ip).cost_from_content_length(16 << 10),
    );

    Ok(axum::Router::new()
        .route("/", get(|| async { "hello" }))
        .route(
            "/upload",
            post(|body: axum::body::Bytes| async move { format!("stored {} bytes", body.len()) })
                .layer(uploads),
        )
        .layer(limits))
}

/// One printed curl line: a request, sent once per answer, and what each response is.
pub(crate) struct Try {
    pub(crate) path: &'static str,
    pub(crate) headers: &'static [(&'static str, &'static str)],
    /// `Some(n)`: a POST of `n` bytes, which `/upload`'s byte quota counts.
    pub(crate) upload: Option<usize>,
    /// The responses, in turn.
    pub(crate) answers: &'static [Answer],
    /// Why, in words.
    pub(crate) because: &'static str,
}

/// What one response is.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Admitted (200).
    Ok,
    /// Admitted (200), and the `RateLimit` member of this policy says `r` left.
    OkLeft(&'static str, u32),
    /// Refused with this status, by this policy.
    Refused(u16, &'static str),
}

const KEY: (&str, &str) = ("x-api-key", "k1");

/// The curl lines, in the order to try them.
pub(crate) const TRIES: &[Try] = &[
    Try {
        path: "/",
        headers: &[],
        upload: None,
        answers: &[Answer::Refused(401, "api-key")],
        because: "no API key, refused before any limit counts it",
    },
    Try {
        path: "/",
        headers: &[KEY],
        upload: None,
        answers: &[
            Answer::Ok,
            Answer::Ok,
            Answer::Ok,
            Answer::Ok,
            Answer::Ok,
            Answer::Refused(429, "ip"),
        ],
        because: "5 a minute per client (this machine, no X-Forwarded-For)",
    },
    Try {
        path: "/",
        headers: &[KEY, ("x-forwarded-for", "203.0.113.9")],
        upload: None,
        answers: &[Answer::OkLeft("ip", 4)],
        because: "another client behind the proxy has its own 5",
    },
    Try {
        path: "/upload",
        headers: &[KEY, ("x-forwarded-for", "198.51.100.7")],
        upload: Some(40_000),
        answers: &[Answer::Ok, Answer::Refused(429, "upload-bytes")],
        because: "64 KiB a minute per client",
    },
    Try {
        path: "/",
        headers: &[KEY, ("x-forwarded-for", "198.51.100.7")],
        upload: None,
        answers: &[Answer::OkLeft("ip", 2)],
        because: "\"ip\" counted the refused upload too: stacked layers are not all-or-nothing",
    },
];

/// The shell command of `t` against `addr`.
pub(crate) fn command(addr: SocketAddr, t: &Try) -> String {
    let mut curl = String::from("curl -s -w ' %{http_code} %header{ratelimit}\\n'");
    for (name, value) in t.headers {
        curl.push_str(&format!(" -H '{name}: {value}'"));
    }
    if t.upload.is_some() {
        curl.push_str(" --data-binary @-");
    }
    curl.push_str(&format!(" http://{addr}{}", t.path));
    if let Some(n) = t.upload {
        curl = format!("head -c {n} /dev/zero | {curl}");
    }
    match t.answers.len() {
        1 => curl,
        n => {
            let seq: Vec<String> = (1..=n).map(|i| i.to_string()).collect();
            format!("for i in {}; do {curl}; done", seq.join(" "))
        }
    }
}

/// What `t` claims: each answer (repeats counted), then why.
pub(crate) fn claim(t: &Try) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < t.answers.len() {
        let a = t.answers[i];
        let n = t.answers[i..].iter().take_while(|b| **b == a).count();
        let said = match a {
            Answer::Ok => "200".to_owned(),
            Answer::OkLeft(policy, r) => format!("200 with \"{policy}\";r={r}"),
            Answer::Refused(status, policy) => format!("{status} from \"{policy}\""),
        };
        parts.push(if n > 1 { format!("{said} x{n}") } else { said });
        i += n;
    }
    format!("{}: {}", parts.join(", then "), t.because)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:3000").await?;
    let addr = listener.local_addr()?;
    println!("listening on http://{addr}; try, in this order:");
    for t in TRIES {
        println!("  {}\n      # {}", command(addr, t), claim(t));
    }
    axum::serve(
        listener,
        app()?.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await?;
    Ok(())
}
