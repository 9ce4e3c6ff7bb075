//! The layer's added cost per request over the bare limiter, and tower-governor's layer
//! on the same workload in the same run.
//!
//! Every request is admitted (quotas far above the request rate), keyed by the peer IP
//! from axum's `ConnectInfo`, 1,024 clients in turn. The inner service answers at once;
//! futures are polled once with a no-op waker, so the figures are the middleware's own
//! work. `inner only` is building the request and calling the bare service: subtract it
//! from a layer's figure to get that layer's cost.
//!
//! ```text
//! cargo bench --bench http --features axum
//! ```

#![allow(missing_docs)] // criterion_group! generates undocumented items

use std::convert::Infallible;
use std::future::Future;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use axum::body::Body;
use axum::extract::ConnectInfo;
use criterion::{criterion_group, criterion_main, Criterion};
use http::{Request, Response};
use tollgate::http::{ClientIp, Policy, RateLimitLayer};
use tollgate::{Algorithm, KeyedRateLimiter, Quota};
use tower_governor::governor::GovernorConfigBuilder;
use tower_governor::GovernorLayer;
use tower_layer::Layer;
use tower_service::Service;

const CLIENTS: usize = 1024;

/// The inner service: an empty 200 at once.
#[derive(Clone)]
struct Ok200;

impl Service<Request<()>> for Ok200 {
    type Response = Response<Body>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Body>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Request<()>) -> Self::Future {
        std::future::ready(Ok(Response::new(Body::empty())))
    }
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// Polls a future that completes at once.
fn now<F: Future>(f: F, cx: &mut Context<'_>) -> F::Output {
    match pin!(f).as_mut().poll(cx) {
        Poll::Ready(v) => v,
        Poll::Pending => unreachable!("the bench's services answer at once"),
    }
}

fn request(peer: SocketAddr) -> Request<()> {
    let mut req = Request::new(());
    req.extensions_mut().insert(ConnectInfo(peer));
    req
}

fn peers() -> Vec<SocketAddr> {
    (0..CLIENTS)
        .map(|i| SocketAddr::new(IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i as u32)), 40_000))
        .collect()
}

/// Calls `svc` once per iteration, clients in turn.
fn run<S, B>(c: &mut Criterion, name: &str, mut svc: S)
where
    S: Service<Request<()>, Response = Response<B>, Error = Infallible>,
{
    let peers = peers();
    let waker = Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    let mut i = 0;
    c.bench_function(name, |b| {
        b.iter(|| {
            i = (i + 1) % CLIENTS;
            let resp = now(svc.call(request(peers[i])), &mut cx).unwrap();
            assert!(resp.status().is_success());
            black_box(resp)
        })
    });
}

fn limiter() -> KeyedRateLimiter<IpAddr> {
    KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1_000_000_000))
        .build()
        .unwrap()
}

fn bench(c: &mut Criterion) {
    let bare = limiter();
    let peers = peers();
    let mut i = 0;
    c.bench_function("bare limiter check", |b| {
        b.iter(|| {
            i = (i + 1) % CLIENTS;
            black_box(bare.check(&peers[i].ip()))
        })
    });
    run(c, "inner only", Ok200);

    let tollgate = RateLimitLayer::new(Policy::new("ip", limiter(), ClientIp::peer()));
    run(
        c,
        "tollgate layer, RateLimit headers",
        tollgate.clone().layer(Ok200),
    );
    run(
        c,
        "tollgate layer, no headers",
        tollgate.headers_on_allowed(false).layer(Ok200),
    );

    let quiet = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(1_000_000_000)
        .finish()
        .unwrap();
    run(
        c,
        "tower-governor layer, no headers",
        GovernorLayer::new(quiet).layer(Ok200),
    );
    let headers = GovernorConfigBuilder::default()
        .per_nanosecond(1)
        .burst_size(1_000_000_000)
        .use_headers()
        .finish()
        .unwrap();
    run(
        c,
        "tower-governor layer, x-ratelimit headers",
        GovernorLayer::new(headers).layer(Ok200),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_millis(500))
        .measurement_time(std::time::Duration::from_secs(2));
    targets = bench
}
criterion_main!(benches);
