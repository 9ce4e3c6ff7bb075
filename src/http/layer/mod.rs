//! `RateLimitLayer` and its service `RateLimit`: the layer's configuration and the
//! `call` that decides before the inner service runs. The response future is in
//! `future`, what a verdict becomes in `verdict`.

mod future;
#[cfg(all(test, feature = "metrics"))]
mod metrics_tests;
mod verdict;

use std::fmt;
use std::task::{Context, Poll};

use http::{Request, Response, StatusCode};
use tower_layer::Layer;
use tower_service::Service;

use super::body::ResponseBody;
use super::budget::Settlement;
use super::decide::{decide, decide_now};
use super::policy::Policy;
use super::response::{policy_header, Headers};
use crate::sync::StdArc as Arc;
pub use future::ResponseFuture;
use future::{finish, Kind};
use verdict::{next, Next};

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
    /// Whether any policy is a budget: forwarded requests then get a `Budget` handle.
    budgets: bool,
}

/// A tower [`Layer`] that rate-limits requests by one or more [`Policy`]s.
///
/// Works as axum's `Router::layer`, tonic's `Server::builder().layer(..)` and with any
/// tower stack over `http::Request<B>`. Every service it makes shares the policies'
/// limiters (clones never get their own state).
///
/// The policies of one layer are all-or-nothing: a request one of them denies consumes
/// nothing from the others ([`policy`](Self::policy)). Stacked layers are not: each
/// decides on its own, so a request an inner layer denies (say, a route's byte quota
/// under a router-wide per-IP limit) has been counted by every layer outside it. Put
/// limits that must hold together in one layer.
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
                at_once: policies.iter().all(|p| !p.backend.is_async()),
                budgets: policies.iter().any(Policy::is_budget),
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
    /// them consumes nothing from the others of this layer (a layer stacked outside this
    /// one has already counted it): with two or more enforced policies, each is
    /// first peeked and then acquired (for a Redis exact backend, two round trips). Between
    /// the peek and the acquire another request may take the last capacity of a later
    /// policy; the earlier ones are then given back through [`Backend::release`](super::Backend::release) where the
    /// backend can (see there). Budget policies ([`Policy::budget`]) take nothing at
    /// admission: they are asked first, and charged after the response.
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
            c.at_once = c.policies.iter().all(|p| !p.backend.is_async());
            c.budgets = c.policies.iter().any(Policy::is_budget);
        })
    }

    /// Whether admitted responses carry `RateLimit-Policy` and `RateLimit` (default true;
    /// denials always do). A shadow policy is in them only with
    /// [`Policy::shadow_headers`].
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
        let (mut parts, body) = req.into_parts();
        if self.config.at_once {
            let verdict = decide_now(&self.config.policies, &parts);
            let kind = match next(&self.config, &parts, verdict) {
                Next::Forward(headers, budgets) => {
                    let settle = self
                        .config
                        .budgets
                        .then(|| Settlement::new(budgets, &mut parts.extensions));
                    Kind::Inner {
                        future: self.inner.call(Request::from_parts(parts, body)),
                        headers,
                        settle,
                    }
                }
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
                Next::Forward(headers, budgets) => {
                    let settle = config
                        .budgets
                        .then(|| Settlement::new(budgets, &mut parts.extensions));
                    // An error drops `settle` on the way out: what was recorded is charged.
                    let resp = inner.call(Request::from_parts(parts, body)).await?;
                    Ok(finish(resp, headers, settle))
                }
                Next::Refuse(r) => Ok(r),
            }
        });
        ResponseFuture {
            kind: Kind::Boxed { future },
        }
    }
}
