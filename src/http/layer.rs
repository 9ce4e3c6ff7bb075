//! `RateLimitLayer`, its service and response future.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::{HeaderMap, Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_layer::Layer;
use tower_service::Service;

use super::body::ResponseBody;
use super::decide::{decide, decide_now, no_key_detail, Verdict};
use super::policy::Policy;
use super::response::{
    fields, is_grpc, policy_header, refuse, retry_after, Fields, Headers, Refusal, RATELIMIT,
    RATELIMIT_POLICY,
};

/// What the layer answers when a policy's backend fails (a Redis error with no
/// `Fallback` configured on the limiter).
///
/// # Example
///
/// ```
/// # use tollgate::http::{Global, OnBackendError, Policy, RateLimitLayer};
/// # use tollgate::{Algorithm, Quota, RateLimiter};
/// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
/// let fail_open = RateLimitLayer::new(Policy::new("g", l, Global)).on_backend_error(OnBackendError::Allow);
/// # let _ = fail_open;
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnBackendError {
    /// Answer with this status (default 503 Service Unavailable; gRPC: UNAVAILABLE).
    Status(StatusCode),
    /// Forward the request as if the failing policy did not exist (fail open).
    Allow,
}

#[derive(Clone, Debug)]
struct Config {
    policies: Arc<[Policy]>,
    headers: Headers,
    on_error: OnBackendError,
    at_once: bool,
}

/// A tower [`Layer`] that rate-limits requests by one or more [`Policy`]s.
///
/// Works as axum's `Router::layer`, tonic's `Server::builder().layer(..)` and with any
/// tower stack over `http::Request<B>`. Every service it makes shares the policies'
/// limiters (clones never get their own state).
///
/// # Example
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::http::{ClientIp, Global, HeaderKey, Policy, RateLimitLayer};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};
///
/// let per_ip = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(60)).build()?;
/// let per_key = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
/// let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1000)).build()?;
/// let layer = RateLimitLayer::new(Policy::new("ip", per_ip, ClientIp::trusted_proxies(["10.0.0.0/8"])?))
///     .policy(Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?))
///     .policy(Policy::new("global", global, Global))
///     .legacy_headers(true);
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Debug)]
pub struct RateLimitLayer {
    config: Arc<Config>,
}

impl RateLimitLayer {
    /// A layer applying `policy`.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// let layer = RateLimitLayer::new(Policy::new("global", global, Global));
    /// # let _ = layer;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn new(policy: Policy) -> Self {
        let policies: Arc<[Policy]> = Arc::from(vec![policy]);
        RateLimitLayer {
            config: Arc::new(Config {
                headers: Headers {
                    on_allowed: true,
                    legacy: false,
                    policy: policy_header(&policies),
                },
                at_once: policies.iter().all(|p| !p.engine.is_async()),
                policies,
                on_error: OnBackendError::Status(StatusCode::SERVICE_UNAVAILABLE),
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Config)) -> Self {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// Adds a policy. A request must pass every enforced policy, and one denied by any of
    /// them consumes nothing from the others: with two or more enforced policies, each is
    /// first peeked and then acquired (for a Redis exact backend, two round trips). Between
    /// the peek and the acquire another request may take the last capacity of a later
    /// policy; the earlier ones are then given back through [`Backend::release`](super::Backend::release) where the
    /// backend can (see there).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, HeaderKey, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};
    /// # let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// # let per_key = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
    /// let layer = RateLimitLayer::new(Policy::new("global", global, Global))
    ///     .policy(Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?));
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn policy(self, policy: Policy) -> Self {
        self.edit(|c| {
            let mut all = c.policies.to_vec();
            all.push(policy);
            c.policies = all.into();
            c.headers.policy = policy_header(&c.policies);
            c.at_once = c.policies.iter().all(|p| !p.engine.is_async());
        })
    }

    /// Whether admitted responses carry `RateLimit-Policy` and `RateLimit` (default true;
    /// denials always do).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// let quiet = RateLimitLayer::new(Policy::new("global", global, Global)).headers_on_allowed(false);
    /// # let _ = quiet;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn headers_on_allowed(self, on: bool) -> Self {
        self.edit(|c| c.headers.on_allowed = on)
    }

    /// Adds the legacy `X-RateLimit-Limit`, `X-RateLimit-Remaining` and `X-RateLimit-Reset`
    /// fields (default off), from the policy with the fewest remaining. `Reset` is a delay
    /// in whole seconds (the `t` of the `RateLimit` field), not a Unix timestamp.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// let legacy = RateLimitLayer::new(Policy::new("global", global, Global)).legacy_headers(true);
    /// # let _ = legacy;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn legacy_headers(self, on: bool) -> Self {
        self.edit(|c| c.headers.legacy = on)
    }

    /// What to answer when a backend fails (default `Status(503)`).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, OnBackendError, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let global = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
    /// let layer = RateLimitLayer::new(Policy::new("global", global, Global))
    ///     .on_backend_error(OnBackendError::Status(http::StatusCode::TOO_MANY_REQUESTS));
    /// # let _ = layer;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn on_backend_error(self, outcome: OnBackendError) -> Self {
        self.edit(|c| c.on_error = outcome)
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimit<S>;

    fn layer(&self, inner: S) -> RateLimit<S> {
        RateLimit {
            inner,
            config: Arc::clone(&self.config),
        }
    }
}

/// The service [`RateLimitLayer`] wraps around `S`. Its error is `S`'s: a denial is a
/// response, never an error.
///
/// # Example
///
/// ```
/// use std::convert::Infallible;
/// use tollgate::http::{Global, Policy, RateLimitLayer};
/// use tollgate::{Algorithm, Quota, RateLimiter};
/// use tower_layer::Layer;
/// use tower_service::Service;
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let one = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1)).build()?;
/// let echo = tower_service_fn(|_req: http::Request<()>| async {
///     Ok::<_, Infallible>(http::Response::new(http_body_util::Empty::<bytes::Bytes>::new()))
/// });
/// let mut svc = RateLimitLayer::new(Policy::new("one", one, Global)).layer(echo);
/// assert_eq!(svc.call(http::Request::new(())).await?.status(), 200);
/// assert_eq!(svc.call(http::Request::new(())).await?.status(), 429);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # })
/// # }
/// # #[derive(Clone)]
/// # struct ServiceFn<F>(F);
/// # fn tower_service_fn<F>(f: F) -> ServiceFn<F> { ServiceFn(f) }
/// # impl<F, Fut, R> Service<http::Request<()>> for ServiceFn<F>
/// # where F: FnMut(http::Request<()>) -> Fut, Fut: std::future::Future<Output = Result<R, Infallible>> {
/// #     type Response = R; type Error = Infallible; type Future = Fut;
/// #     fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), Infallible>> { std::task::Poll::Ready(Ok(())) }
/// #     fn call(&mut self, req: http::Request<()>) -> Fut { (self.0)(req) }
/// # }
/// ```
#[derive(Clone)]
pub struct RateLimit<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for RateLimit<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("policies", &self.config.policies)
            .finish()
    }
}

type BoxResponse<B, E> = Pin<Box<dyn Future<Output = Result<Response<ResponseBody<B>>, E>> + Send>>;

pin_project! {
    /// The future of [`RateLimit`]'s `call`: the inner service's (plus the rate-limit
    /// headers), the layer's own refusal, or (with an asynchronous backend) a boxed
    /// decision followed by the inner call.
    ///
    /// # Example
    ///
    /// ```
    /// fn is_future<F: std::future::Future>() {}
    /// is_future::<tollgate::http::ResponseFuture<std::future::Ready<Result<http::Response<String>, ()>>, String, ()>>();
    /// ```
    pub struct ResponseFuture<F, B, E> {
        #[pin]
        kind: Kind<F, B, E>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<F, B, E> {
        Inner { #[pin] future: F, headers: Option<Fields> },
        // Boxed: a refusal allocates its body anyway, and the admitted path's future
        // stays small.
        Refused { response: Option<Box<Response<ResponseBody<B>>>> },
        Boxed { future: BoxResponse<B, E> },
    }
}

impl<F, B, E> Future for ResponseFuture<F, B, E>
where
    F: Future<Output = Result<Response<B>, E>>,
{
    type Output = Result<Response<ResponseBody<B>>, E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match self.project().kind.project() {
            KindProj::Inner { future, headers } => {
                let resp = std::task::ready!(future.poll(cx))?;
                Poll::Ready(Ok(finish(resp, headers.take())))
            }
            KindProj::Refused { response } => match response.take() {
                Some(r) => Poll::Ready(Ok(*r)),
                None => Poll::Pending,
            },
            KindProj::Boxed { future } => future.as_mut().poll(cx),
        }
    }
}

fn finish<B>(resp: Response<B>, headers: Option<Fields>) -> Response<ResponseBody<B>> {
    let (mut parts, body) = resp.into_parts();
    if let Some(h) = headers {
        merge(&mut parts.headers, h);
    }
    Response::from_parts(parts, ResponseBody::inner(body))
}

/// Adds this layer's fields to a response that an inner layer (or the service) may have
/// given its own: `RateLimit` and `RateLimit-Policy` are Lists, so the members are joined
/// (inner first); any other field already present is the inner one's and is kept.
fn merge(into: &mut HeaderMap, ours: Fields) {
    for (name, value) in ours.into_iter() {
        match into.get(&name) {
            None => {
                into.insert(name, value);
            }
            Some(theirs) if name == RATELIMIT || name == RATELIMIT_POLICY => {
                let mut joined = theirs.as_bytes().to_vec();
                joined.extend_from_slice(b", ");
                joined.extend_from_slice(value.as_bytes());
                if let Ok(v) = http::HeaderValue::from_bytes(&joined) {
                    into.insert(name, v);
                }
            }
            Some(_) => {}
        }
    }
}

/// What the service does after the decision.
enum Next<B> {
    /// Call the inner service; add these headers to its response.
    Forward(Option<Fields>),
    Refuse(Response<ResponseBody<B>>),
}

/// Counts the verdict in the policies' `metrics` series (feature `metrics`).
#[cfg(feature = "metrics")]
fn record(policies: &[Policy], verdict: &Verdict) {
    match verdict {
        Verdict::Pass(reports) => {
            for r in reports.iter() {
                let c = &policies[r.policy].counters;
                if r.denied() { &c.shadow } else { &c.allowed }.increment(1);
            }
        }
        Verdict::Deny(reports) => {
            for r in reports.iter() {
                policies[r.policy].counters.limited.increment(1);
            }
        }
        Verdict::Failed(i, _) => policies[*i].counters.backend_errors.increment(1),
        Verdict::Reject(..) | Verdict::NoKey(_) => {}
    }
}

fn next<B>(config: &Config, parts: &http::request::Parts, verdict: Verdict) -> Next<B> {
    let policies = &config.policies;
    #[cfg(feature = "metrics")]
    record(policies, &verdict);
    // Read only when refusing: the admitted path does not look at the content type.
    let grpc = || is_grpc(&parts.headers);
    match verdict {
        Verdict::Pass(reports) => {
            let h = &config.headers;
            if h.on_allowed || h.legacy {
                let f = fields(h, policies, &reports, h.on_allowed);
                Next::Forward((!f.is_empty()).then_some(f))
            } else {
                Next::Forward(None)
            }
        }
        Verdict::Deny(reports) => {
            let names: Vec<&str> = reports.iter().map(|r| policies[r.policy].name()).collect();
            let retry = retry_after(&reports);
            let detail = match retry {
                Some(s) => format!("rate limit {:?} exceeded; retry in {s} s", names.join(", ")),
                None => format!(
                    "request cost exceeds the capacity of {:?}; it can never be admitted",
                    names.join(", ")
                ),
            };
            let mut resp = refuse(
                grpc(),
                &Refusal {
                    status: StatusCode::TOO_MANY_REQUESTS,
                    detail,
                    violated: names,
                    retry_after: retry,
                },
            );
            fields(&config.headers, policies, &reports, true).insert_into(resp.headers_mut());
            Next::Refuse(resp)
        }
        Verdict::Reject(i, status) => Next::Refuse(refuse(
            grpc(),
            &Refusal {
                status,
                detail: format!("request has no key for rate limit {:?}", policies[i].name()),
                violated: Vec::new(),
                retry_after: None,
            },
        )),
        Verdict::NoKey(i) => {
            let detail = no_key_detail(&policies[i], parts);
            policies[i].report_missing_once(&detail);
            Next::Refuse(refuse(
                grpc(),
                &Refusal {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    detail,
                    violated: Vec::new(),
                    retry_after: None,
                },
            ))
        }
        Verdict::Failed(i, e) => match config.on_error {
            OnBackendError::Allow => Next::Forward(None),
            OnBackendError::Status(status) => Next::Refuse(refuse(
                grpc(),
                &Refusal {
                    status,
                    detail: format!("rate limit {:?} could not decide: {e}", policies[i].name()),
                    violated: Vec::new(),
                    retry_after: None,
                },
            )),
        },
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for RateLimit<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<ResponseBody<ResBody>>;
    type Error = S::Error;
    type Future = ResponseFuture<S::Future, ResBody, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        // Readiness is the inner service's: the limit is decided in `call`.
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<ReqBody>) -> Self::Future {
        let (parts, body) = req.into_parts();
        if self.config.at_once {
            let verdict = decide_now(&self.config.policies, &parts);
            let kind = match next(&self.config, &parts, verdict) {
                Next::Forward(headers) => Kind::Inner {
                    future: self.inner.call(Request::from_parts(parts, body)),
                    headers,
                },
                Next::Refuse(r) => Kind::Refused {
                    response: Some(Box::new(r)),
                },
            };
            return ResponseFuture { kind };
        }
        // The service was made ready for this call: take it, leave a clone for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let config = Arc::clone(&self.config);
        let future = Box::pin(async move {
            let verdict = decide(&config.policies, &parts, false).await;
            match next(&config, &parts, verdict) {
                Next::Forward(headers) => {
                    let resp = inner.call(Request::from_parts(parts, body)).await?;
                    Ok(finish(resp, headers))
                }
                Next::Refuse(r) => Ok(r),
            }
        });
        ResponseFuture {
            kind: Kind::Boxed { future },
        }
    }
}

#[cfg(all(test, feature = "metrics"))]
mod metrics_tests {
    use std::collections::HashMap;
    use std::convert::Infallible;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};

    use metrics::{
        Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
    };
    use tower_layer::Layer;
    use tower_service::Service;

    use super::*;
    use crate::http::{ClientIp, Global, PeerAddr};
    use crate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

    /// A recorder keeping every counter by its rendered key.
    #[derive(Default)]
    struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

    struct Cell(Arc<AtomicU64>);

    impl CounterFn for Cell {
        fn increment(&self, n: u64) {
            self.0.fetch_add(n, Ordering::Relaxed);
        }
        fn absolute(&self, n: u64) {
            self.0.store(n, Ordering::Relaxed);
        }
    }

    impl Recorder for Counters {
        fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
        fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
            let mut labels: Vec<String> = key
                .labels()
                .map(|l| format!("{}={}", l.key(), l.value()))
                .collect();
            labels.sort();
            let name = format!("{}{{{}}}", key.name(), labels.join(","));
            let cell = Arc::clone(self.0.lock().unwrap().entry(name).or_default());
            Counter::from_arc(Arc::new(Cell(cell)))
        }
        fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
            Gauge::noop()
        }
        fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
            Histogram::noop()
        }
    }

    impl Counters {
        fn get(&self, name: &str) -> u64 {
            self.0
                .lock()
                .unwrap()
                .get(name)
                .map_or(0, |c| c.load(Ordering::Relaxed))
        }
    }

    #[derive(Clone)]
    struct Ok200;

    impl Service<Request<()>> for Ok200 {
        type Response = Response<String>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<Response<String>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: Request<()>) -> Self::Future {
            std::future::ready(Ok(Response::new(String::new())))
        }
    }

    fn status<S>(svc: &mut S, peer: bool) -> u16
    where
        S: Service<Request<()>, Response = Response<ResponseBody<String>>, Error = Infallible>,
    {
        let mut req = Request::new(());
        if peer {
            req.extensions_mut()
                .insert(PeerAddr("192.0.2.1:1".parse().unwrap()));
        }
        let waker = std::task::Waker::from(Arc::new(Noop));
        let mut cx = Context::from_waker(&waker);
        match std::pin::pin!(svc.call(req)).as_mut().poll(&mut cx) {
            Poll::Ready(Ok(r)) => r.status().as_u16(),
            _ => unreachable!("answers at once"),
        }
    }

    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }

    #[test]
    fn decisions_by_policy_and_outcome_never_by_key() {
        let rec = Counters::default();
        let mut svc = metrics::with_local_recorder(&rec, || {
            let one = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(2))
                .build()
                .unwrap();
            let ip = KeyedRateLimiter::<std::net::IpAddr>::builder(
                Algorithm::FixedWindow,
                Quota::per_minute(1),
            )
            .build()
            .unwrap();
            RateLimitLayer::new(Policy::new("g", one, Global))
                .policy(Policy::new("trial", ip, ClientIp::peer()).shadow())
                .layer(Ok200)
        });
        assert_eq!(status(&mut svc, true), 200);
        assert_eq!(status(&mut svc, true), 200); // trial would have limited
        assert_eq!(status(&mut svc, false), 429); // no peer: trial cannot key it
        assert_eq!(
            rec.get("tollgate_decisions_total{outcome=allowed,policy=g}"),
            2
        );
        assert_eq!(
            rec.get("tollgate_decisions_total{outcome=limited,policy=g}"),
            1
        );
        assert_eq!(
            rec.get("tollgate_decisions_total{outcome=allowed,policy=trial}"),
            1
        );
        assert_eq!(
            rec.get("tollgate_decisions_total{outcome=shadow,policy=trial}"),
            1
        );
        assert_eq!(rec.get("tollgate_missing_keys_total{policy=trial}"), 0);
        assert!(rec
            .0
            .lock()
            .unwrap()
            .keys()
            .all(|k| !k.contains("192.0.2.1")));
    }
}
