//! Token budgets (issue 30): a budget policy admits by a peek, the handler records the
//! real cost in the request's `Budget`, and the layer charges it when the response body
//! ends or is dropped, once.
//!
//! End to end: examples/llm_budget.rs on a real axum server on 127.0.0.1, real hyper
//! clients, its limiter on a `ManualClock` (so that every number is exact). Then the
//! layer around a service of our own, for what a server cannot show exactly: a body
//! dropped after k frames, a handler that fails, a request cancelled before its response,
//! other policies in the same layer, stacked layers, shadow mode, an asynchronous backend.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use tollgate::http::{Budget, Global, HeaderKey, MissingKey, Policy, RateLimitLayer, ResponseBody};
use tollgate::{Algorithm, KeyedRateLimiter, ManualClock, Quota, RateLimiter};
use tower_layer::Layer;
use tower_service::Service;

use crate::llm_budget;
use crate::support::{parse_list, send, serve_app, Reply};

type Tokens = Arc<KeyedRateLimiter<String, ManualClock>>;

/// 600 tokens a minute per key (10 a second, a burst of 600), on a clock that moves only
/// when told.
fn tokens(clock: &ManualClock) -> Tokens {
    Arc::new(
        KeyedRateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(600))
            .clock(clock.clone())
            .build()
            .unwrap(),
    )
}

/// What `key` has left now (a peek of 0 takes nothing).
fn left(tokens: &Tokens, key: &str) -> u32 {
    tokens.peek_n(&key.to_owned(), 0).unwrap().remaining()
}

async fn generate(addr: std::net::SocketAddr, key: &str, n: u32) -> Reply {
    send(
        addr,
        "GET",
        &format!("/v1/generate?tokens={n}"),
        &[("x-api-key", key)],
        "",
    )
    .await
}

/// The `(r, t)` of the `RateLimit` field's one member, which must be "tokens".
fn rate_limit(reply: &Reply) -> (i64, i64) {
    let items = parse_list(reply.header("ratelimit").expect("a RateLimit field"));
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].name, "tokens");
    (items[0].param("r"), items[0].param("t"))
}

#[tokio::test]
async fn the_example_spends_the_budget_overdraws_it_and_refuses_until_the_debt_is_paid() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let addr = serve_app(llm_budget::app(Arc::clone(&tokens)).unwrap()).await;

    // 500 of 600: admitted with everything left (the fields report the state at
    // admission), and charged when the body ended, before the client saw its end.
    let r = generate(addr, "k1", 500).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("tok").count(), 500);
    assert!(
        r.body.ends_with("tok500 "),
        "{}",
        &r.body[r.body.len() - 20..]
    );
    assert_eq!(rate_limit(&r), (600, 0));
    let policy = parse_list(r.header("ratelimit-policy").unwrap());
    assert_eq!((policy[0].param("q"), policy[0].param("w")), (600, 60));
    assert_eq!(left(&tokens, "k1"), 100);

    // 300 with 100 left: admitted (the key has something left), then charged in full
    // though it went past the budget: 200 owed.
    let r = generate(addr, "k1", 300).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.body.matches("tok").count(), 300);
    assert_eq!(rate_limit(&r), (100, 50)); // whole again in 500 / 10 s
    assert_eq!(left(&tokens, "k1"), 0);

    // The debt: 200 tokens at 10 a second, then 0.1 s for the one token a request
    // needs: 20.1 s, so `Retry-After: 21` and `t=21`, and nothing charged.
    let r = generate(addr, "k1", 10).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("21"));
    assert_eq!(rate_limit(&r), (0, 21));
    assert_eq!(r.header("content-type"), Some("application/problem+json"));
    assert!(
        r.body.contains(r#""violated-policies":["tokens"]"#),
        "{}",
        r.body
    );
    assert_eq!(
        tokens.peek(&"k1".to_owned()).retry_after(),
        Some(Duration::from_millis(20_100)),
        "the refused request took nothing"
    );

    // Another key has its own budget.
    let r = generate(addr, "k2", 1).await;
    assert_eq!((r.status, rate_limit(&r)), (200, (600, 0)));

    // 20 s pay the debt off, and 0.1 s more refill the one token the next request needs.
    clock.advance(Duration::from_secs(20));
    let r = generate(addr, "k1", 1).await;
    assert_eq!(r.status, 429);
    assert_eq!(r.header("retry-after"), Some("1"));
    clock.advance(Duration::from_millis(100));
    let r = generate(addr, "k1", 1).await;
    assert_eq!(r.status, 200);
    assert_eq!(rate_limit(&r).0, 1);
    assert_eq!(left(&tokens, "k1"), 0);

    // No API key: 401, and nothing counted anywhere.
    let r = send(addr, "GET", "/v1/generate?tokens=5", &[], "").await;
    assert_eq!(r.status, 401);
}

#[tokio::test]
async fn a_client_that_disconnects_mid_stream_is_charged_only_what_was_streamed() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let addr = serve_app(llm_budget::app(Arc::clone(&tokens)).unwrap()).await;

    // A real HTTP/1.1 connection of our own, so that closing it is in our hands.
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let driver = tokio::spawn(conn);
    let req = Request::get("/v1/generate?tokens=1000&pace_ms=20")
        .header("host", addr.to_string())
        .header("x-api-key", "k3")
        .body(Empty::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut body = resp.into_body();
    let mut seen = 0;
    while seen < 10 {
        let frame = body.frame().await.expect("more tokens").unwrap();
        if let Some(data) = frame.data_ref() {
            seen += std::str::from_utf8(data).unwrap().matches("tok").count();
        }
    }
    // The client goes away: its connection is closed.
    drop(body);
    drop(sender);
    driver.abort();
    let _ = driver.await;

    // The server notices at its next write, drops the body, and the layer charges what
    // the handler recorded until then: what the client read, and at most the few tokens
    // produced while the close was on its way, never the 1,000 asked for.
    let start = Instant::now();
    while left(&tokens, "k3") == 600 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "nothing was charged after the client went away"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let charged = 600 - left(&tokens, "k3");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(600 - left(&tokens, "k3"), charged, "charged once");
    assert!(
        (seen as u32..=seen as u32 + 25).contains(&charged),
        "read {seen} tokens, charged {charged}"
    );
}

// ---- The layer around a service of our own -------------------------------------------

type Reply2 = Response<Full<Bytes>>;
type HandlerFuture = Pin<Box<dyn Future<Output = Result<Reply2, &'static str>> + Send>>;

/// A service from a closure (what the handler does with the request).
#[derive(Clone)]
struct Handler(Arc<dyn Fn(Request<()>) -> HandlerFuture + Send + Sync>);

impl Service<Request<()>> for Handler {
    type Response = Reply2;
    type Error = &'static str;
    type Future = HandlerFuture;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<()>) -> HandlerFuture {
        (self.0)(req)
    }
}

/// A handler that records `cost` in the request's budget and answers "done".
fn records(cost: u32) -> Handler {
    Handler(Arc::new(move |req: Request<()>| {
        let budget = req.extensions().get::<Budget>().cloned();
        Box::pin(async move {
            budget.expect("a Budget in the extensions").charge(cost);
            Ok(Response::new(Full::new(Bytes::from_static(b"done"))))
        })
    }))
}

fn keyed(key: &str) -> Request<()> {
    Request::get("/").header("x-api-key", key).body(()).unwrap()
}

fn api_key() -> HeaderKey {
    HeaderKey::new("x-api-key").unwrap()
}

async fn drain<B: http_body::Body>(body: B)
where
    B::Error: std::fmt::Debug,
{
    body.collect().await.unwrap();
}

/// A body of `n` one-token frames that records each token as it is produced.
struct Streamed {
    left: u32,
    budget: Budget,
}

impl http_body::Body for Streamed {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        if self.left == 0 {
            return Poll::Ready(None);
        }
        self.left -= 1;
        self.budget.charge(1);
        Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(b"t")))))
    }

    fn is_end_stream(&self) -> bool {
        self.left == 0
    }
}

#[derive(Clone)]
struct StreamHandler(u32);

impl Service<Request<()>> for StreamHandler {
    type Response = Response<Streamed>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<Streamed>, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<()>) -> Self::Future {
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        std::future::ready(Ok(Response::new(Streamed {
            left: self.0,
            budget,
        })))
    }
}

async fn next_frame(body: &mut ResponseBody<Streamed>) -> Option<Bytes> {
    body.frame().await.map(|f| f.unwrap().into_data().unwrap())
}

#[tokio::test]
async fn a_body_dropped_after_k_frames_is_charged_exactly_k_and_a_whole_one_before_its_end() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let mut svc = RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()))
        .layer(StreamHandler(50));

    // Dropped after 7 frames: 7 charged, once.
    let mut body = svc.call(keyed("a")).await.unwrap().into_body();
    for _ in 0..7 {
        next_frame(&mut body).await.unwrap();
    }
    assert_eq!(left(&tokens, "a"), 600, "nothing is charged before the end");
    drop(body);
    assert_eq!(left(&tokens, "a"), 593);

    // Read to the end: charged when the last frame comes out, before the end of the
    // stream is polled (a server that sees `is_end_stream` does not poll again).
    let mut body = svc.call(keyed("b")).await.unwrap().into_body();
    for _ in 0..49 {
        next_frame(&mut body).await.unwrap();
    }
    assert_eq!(left(&tokens, "b"), 600);
    next_frame(&mut body).await.unwrap();
    assert!(http_body::Body::is_end_stream(&body));
    assert_eq!(left(&tokens, "b"), 550);
    assert!(next_frame(&mut body).await.is_none());
    drop(body);
    assert_eq!(left(&tokens, "b"), 550, "charged once");

    // A response dropped unread: nothing was recorded, nothing charged.
    drop(svc.call(keyed("c")).await.unwrap());
    assert_eq!(left(&tokens, "c"), 600);
}

#[tokio::test]
async fn a_failed_or_cancelled_request_is_charged_what_the_handler_recorded() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let layer = RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()));

    // The handler records 7 tokens and fails.
    let failing = Handler(Arc::new(|req: Request<()>| {
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        Box::pin(async move {
            budget.charge(7);
            Err("upstream model failed")
        })
    }));
    let err = layer.layer(failing).call(keyed("a")).await.err();
    assert_eq!(err, Some("upstream model failed"));
    assert_eq!(left(&tokens, "a"), 593);

    // The handler records 3 tokens and never answers; the caller gives up.
    let stuck = Handler(Arc::new(|req: Request<()>| {
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        Box::pin(async move {
            budget.charge(3);
            std::future::pending::<()>().await;
            unreachable!()
        })
    }));
    let cancelled = tokio::time::timeout(
        Duration::from_millis(50),
        layer.layer(stuck).call(keyed("b")),
    )
    .await;
    assert!(cancelled.is_err());
    assert_eq!(left(&tokens, "b"), 597);
}

#[tokio::test]
async fn set_cost_replaces_and_the_handle_reports_what_was_left_at_admission() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let handler = Handler(Arc::new(move |req: Request<()>| {
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        log.lock().unwrap().push(budget.remaining());
        Box::pin(async move {
            budget.charge(1_000); // an estimate while streaming
            budget.set_cost(250); // the provider's count at the end
            Ok(Response::new(Full::new(Bytes::new())))
        })
    }));
    let mut svc = RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()))
        .layer(handler);
    for _ in 0..2 {
        drain(svc.call(keyed("a")).await.unwrap().into_body()).await;
    }
    assert_eq!(*seen.lock().unwrap(), [Some(600), Some(350)]);
    assert_eq!(left(&tokens, "a"), 100);
}

#[tokio::test]
async fn with_request_count_policies_all_or_nothing_holds_both_ways() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let requests = Arc::new(
        KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(3))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let calls = Arc::new(AtomicU32::new(0));
    let counted = Arc::clone(&calls);
    // Key "a" costs 400 tokens a request, any other key 1.
    let handler = Handler(Arc::new(move |req: Request<()>| {
        counted.fetch_add(1, Ordering::SeqCst);
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        let cost = if req.headers()["x-api-key"] == "a" {
            400
        } else {
            1
        };
        Box::pin(async move {
            budget.charge(cost);
            Ok(Response::new(Full::new(Bytes::new())))
        })
    }));
    let mut svc = RateLimitLayer::new(Policy::new("requests", Arc::clone(&requests), api_key()))
        .policy(Policy::budget("tokens", Arc::clone(&tokens), api_key()))
        .layer(handler);
    let requests_left = |key: &str| requests.peek_n(&key.to_owned(), 0).unwrap().remaining();

    // Admitted by both: the request counted, the tokens charged after; both fields.
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 200);
    let fields = parse_list(resp.headers()["ratelimit"].to_str().unwrap());
    let names: Vec<&str> = fields.iter().map(|i| i.name.as_str()).collect();
    assert_eq!(names, ["tokens", "requests"]);
    drain(resp.into_body()).await;
    assert_eq!((requests_left("a"), left(&tokens, "a")), (2, 200));
    drain(svc.call(keyed("a")).await.unwrap().into_body()).await;
    assert_eq!((requests_left("a"), left(&tokens, "a")), (1, 0));

    // The budget refuses (200 owed): the request-count policy takes nothing.
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(requests_left("a"), 1);
    assert_eq!(calls.load(Ordering::SeqCst), 2);

    // The request-count policy refuses: the budget (asked first) is not charged.
    for _ in 0..3 {
        drain(svc.call(keyed("b")).await.unwrap().into_body()).await;
    }
    assert_eq!(requests_left("b"), 0);
    let before = tokens.peek(&"b".to_owned());
    let resp = svc.call(keyed("b")).await.unwrap();
    assert_eq!(resp.status(), 429);
    let fields = parse_list(resp.headers()["ratelimit"].to_str().unwrap());
    assert_eq!(fields[0].name, "requests");
    assert_eq!(tokens.peek(&"b".to_owned()), before);
    assert_eq!(calls.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn stacked_layers_and_several_budget_policies_share_one_handle() {
    let clock = ManualClock::new();
    let per_key = tokens(&clock);
    let per_day = tokens(&clock);
    let global = Arc::new(
        RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(6_000))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let inner = RateLimitLayer::new(Policy::budget("global", Arc::clone(&global), Global));
    let outer = RateLimitLayer::new(Policy::budget("per-key", Arc::clone(&per_key), api_key()))
        .policy(Policy::budget("per-day", Arc::clone(&per_day), api_key()));
    let mut svc = outer.layer(inner.layer(records(40)));
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 200);
    drain(resp.into_body()).await;
    assert_eq!(left(&per_key, "a"), 560);
    assert_eq!(left(&per_day, "a"), 560);
    assert_eq!(global.peek_n(0).unwrap().remaining(), 5_960);
}

#[tokio::test]
async fn the_cost_of_a_budget_policy_is_what_must_be_left_to_admit() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    // A request asks for up to 100 tokens (say, its max_tokens).
    let mut svc =
        RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()).cost(|_| 100))
            .layer(records(550));
    drain(svc.call(keyed("a")).await.unwrap().into_body()).await;
    assert_eq!(left(&tokens, "a"), 50);
    // 50 left, 100 needed: refused until 50 more have come back (5 s), taking nothing.
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "5");
    assert_eq!(left(&tokens, "a"), 50);
    clock.advance(Duration::from_secs(5));
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 200);
    // A cost past the burst can never be admitted: no Retry-After.
    let mut svc =
        RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()).cost(|_| 601))
            .layer(records(1));
    let resp = svc.call(keyed("z")).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().get("retry-after").is_none());
}

#[tokio::test]
async fn a_shadow_budget_reports_never_refuses_and_charges_only_what_it_would_admit() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let mut svc = RateLimitLayer::new(
        Policy::budget("tokens", Arc::clone(&tokens), api_key())
            .shadow()
            .shadow_headers(true),
    )
    .layer(records(700));
    drain(svc.call(keyed("a")).await.unwrap().into_body()).await;
    assert_eq!(left(&tokens, "a"), 0); // 100 owed
    let before = tokens.peek(&"a".to_owned());
    let resp = svc.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 200, "a shadow policy never refuses");
    let fields = parse_list(resp.headers()["ratelimit"].to_str().unwrap());
    assert_eq!((fields[0].param("r"), fields[0].param("t")), (0, 11));
    drain(resp.into_body()).await;
    assert_eq!(
        tokens.peek(&"a".to_owned()),
        before,
        "a request it would refuse is not charged"
    );
    // Without `shadow_headers(true)` clients are told nothing of it.
    let mut quiet =
        RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()).shadow())
            .layer(records(1));
    let resp = quiet.call(keyed("a")).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert!(resp.headers().get("ratelimit").is_none());
    assert!(resp.headers().get("ratelimit-policy").is_none());
}

#[tokio::test]
async fn without_a_key_a_skipping_budget_charges_nothing_but_the_handler_has_a_handle() {
    let clock = ManualClock::new();
    let tokens = tokens(&clock);
    let seen = Arc::new(Mutex::new(None));
    let log = Arc::clone(&seen);
    let handler = Handler(Arc::new(move |req: Request<()>| {
        let budget = req.extensions().get::<Budget>().cloned().unwrap();
        *log.lock().unwrap() = Some(budget.remaining());
        Box::pin(async move {
            budget.charge(9);
            Ok(Response::new(Full::new(Bytes::new())))
        })
    }));
    let mut svc = RateLimitLayer::new(
        Policy::budget("tokens", Arc::clone(&tokens), api_key()).on_missing_key(MissingKey::Skip),
    )
    .layer(handler);
    let resp = svc.call(Request::new(())).await.unwrap();
    assert_eq!(resp.status(), 200);
    drain(resp.into_body()).await;
    assert_eq!(*seen.lock().unwrap(), Some(None));
    assert_eq!(tokens.len(), 0);
    // The default refuses it, as for any policy.
    let mut svc = RateLimitLayer::new(Policy::budget("tokens", Arc::clone(&tokens), api_key()))
        .layer(records(1));
    assert_eq!(svc.call(Request::new(())).await.unwrap().status(), 500);
}

#[tokio::test]
async fn a_layer_without_budget_policies_inserts_no_handle() {
    let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(5))
        .build()
        .unwrap();
    let handler = Handler(Arc::new(|req: Request<()>| {
        let has = req.extensions().get::<Budget>().is_some();
        Box::pin(async move {
            assert!(!has, "a Budget from a layer without budget policies");
            Ok(Response::new(Full::new(Bytes::new())))
        })
    }));
    let mut svc = RateLimitLayer::new(Policy::new("g", limiter, Global)).layer(handler);
    assert_eq!(svc.call(Request::new(())).await.unwrap().status(), 200);
}

#[tokio::test]
async fn the_axum_extractor_says_when_no_budget_policy_covers_the_route() {
    use axum::routing::get;
    let app = axum::Router::new()
        .route("/", get(|_: Budget| async { "unreachable" }))
        .route(
            "/optional",
            get(|b: Option<Budget>| async move { format!("{}", b.is_some()) }),
        );
    let addr = serve_app(app).await;
    let r = send(addr, "GET", "/", &[], "").await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("Policy::budget"), "{}", r.body);
    let r = send(addr, "GET", "/optional", &[], "").await;
    assert_eq!((r.status, r.body.as_str()), (200, "false"));
}

/// A budget backend of our own, answered after a real timer: the layer's boxed
/// (asynchronous) path. (In a module: the traits' methods would shadow the limiters'
/// own `peek` and `charge` on an `Arc` above.)
mod remote {
    use std::sync::Arc;
    use std::time::Duration;

    use tollgate::http::{Acquire, Backend, BudgetBackend};
    use tollgate::{ManualClock, Quota, RateLimiter};

    pub(super) struct Remote(pub(super) Arc<RateLimiter<ManualClock>>);

    impl Remote {
        fn later(&self, n: u32) -> Acquire {
            let l = Arc::clone(&self.0);
            Acquire::pending(async move {
                tokio::time::sleep(Duration::from_millis(2)).await;
                l.peek_n(n).map_err(Into::into)
            })
        }
    }

    impl Backend<()> for Remote {
        fn quota(&self) -> Quota {
            self.0.quota()
        }
        fn acquire(&self, _: &(), cost: u32) -> Acquire {
            let d = self.0.check_n(cost);
            Acquire::ready(d.map_err(Into::into))
        }
        fn peek(&self, _: &()) -> Acquire {
            self.later(0)
        }
        fn is_async(&self) -> bool {
            true
        }
    }

    impl BudgetBackend<()> for Remote {
        fn budget_peek(&self, _: &(), n: u32) -> Acquire {
            self.later(n)
        }
        fn budget_charge(&self, _: &(), n: u32, max_owed: Option<u32>) {
            self.0.budget_charge(&(), n, max_owed);
        }
    }
}

use remote::Remote;

#[tokio::test]
async fn an_asynchronous_budget_backend_admits_and_charges_through_the_boxed_path() {
    let clock = ManualClock::new();
    let limiter = Arc::new(
        RateLimiter::builder(Algorithm::TokenBucket, Quota::per_minute(600))
            .clock(clock.clone())
            .build()
            .unwrap(),
    );
    let mut svc = RateLimitLayer::new(Policy::budget_owing(
        "remote",
        Remote(Arc::clone(&limiter)),
        Global,
        50,
    ))
    .layer(records(900));
    let resp = svc.call(Request::new(())).await.unwrap();
    assert_eq!(resp.status(), 200);
    drain(resp.into_body()).await;
    // 600 left, then at most 50 owed: 650 of the 900 counted.
    assert_eq!(
        limiter.peek().retry_after(),
        Some(Duration::from_millis(5_100))
    );
    let resp = svc.call(Request::new(())).await.unwrap();
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "6");
}
