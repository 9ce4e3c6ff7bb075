//! A policy: a named limiter, how to key a request, what it costs; and a budget policy
//! ([`Policy::budget`]): its constructors and its type-erased charging side.

use std::fmt;

use http::request::Parts;
use http::StatusCode;

use super::backend::{Acquire, Backend, Undo};
use super::budget::{BoundBudget, KeyBudget};
use super::budget_backend::BudgetBackend;
use super::key::KeyExtractor;
use crate::quota::Quota;
use crate::sync::{
    Ordering, PlainAtomicBool as AtomicBool, PlainAtomicU64 as AtomicU64, StdArc as Arc,
};

/// What a policy does with a request whose key cannot be extracted (no peer address, no
/// API-key header, an `unknown` forwarded address).
///
/// The default, [`MissingKey::Fail`], refuses such a request: a limiter that let every
/// unkeyed request through would switch itself off silently when, say, a server is
/// started without recording the peer address. [`MissingKey::Skip`] lets them through,
/// as an explicit choice.
///
/// # Example
///
/// ```
/// use tollgate::http::{HeaderKey, MissingKey, Policy};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// let per_key = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
/// let policy = Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?)
///     .on_missing_key(MissingKey::Reject(http::StatusCode::UNAUTHORIZED));
/// # let _ = policy;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum MissingKey {
    /// Fail closed (the default): the request is answered `500 Internal Server Error`
    /// with an `application/problem+json` body whose `detail` says which key was missing
    /// and why (for [`ClientIp`](super::ClientIp) without a peer address: what the server
    /// must record, e.g. axum's `into_make_service_with_connect_info::<SocketAddr>()`); a
    /// gRPC request gets `grpc-status: 13` (INTERNAL) with that message. The first such
    /// request of a policy (and its clones) is also reported on standard error, once.
    /// Counted in [`Policy::missing_keys`]. A shadow policy never refuses: it only
    /// reports, once.
    #[default]
    Fail,
    /// The policy does not apply to this request: it is let through, neither counted
    /// against the limiter nor reported in the headers (only in
    /// [`Policy::missing_keys`]). Choose it where some requests legitimately have no key
    /// (e.g. a per-API-key limit next to another policy that limits anonymous traffic).
    Skip,
    /// The request is answered with this status and an `application/problem+json` body,
    /// and counted. Ignored in shadow mode.
    Reject(StatusCode),
}

type CostFn = dyn Fn(&Parts) -> u32 + Send + Sync;

/// The type-erased limiter ([`Backend`]) and key extractor of one policy.
pub(crate) trait KeyedBackend: Send + Sync {
    fn quota(&self) -> Quota;
    fn acquire(&self, parts: &Parts, cost: u32) -> Option<Acquire>;
    fn acquire_undoable(&self, parts: &Parts, cost: u32) -> Option<(Acquire, Option<Undo>)>;
    fn peek(&self, parts: &Parts) -> Option<Acquire>;
    fn release(&self, parts: &Parts, cost: u32) -> bool;
    fn undo(&self, parts: &Parts, undo: Undo) -> bool;
    fn is_async(&self) -> bool;
    fn missing_reason(&self, parts: &Parts) -> String;
}

/// A limiter bound to a key extractor (the budget side's too: see `KeyedBudget` below).
pub(super) struct Bound<L, E> {
    pub(super) limiter: L,
    pub(super) key: E,
}

impl<L, E> KeyedBackend for Bound<L, E>
where
    E: KeyExtractor,
    L: Backend<E::Key>,
{
    fn quota(&self) -> Quota {
        self.limiter.quota()
    }

    fn acquire(&self, parts: &Parts, cost: u32) -> Option<Acquire> {
        let key = self.key.extract(parts)?;
        Some(self.limiter.acquire(&key, cost))
    }

    fn acquire_undoable(&self, parts: &Parts, cost: u32) -> Option<(Acquire, Option<Undo>)> {
        let key = self.key.extract(parts)?;
        Some(self.limiter.acquire_undoable(&key, cost))
    }

    fn undo(&self, parts: &Parts, undo: Undo) -> bool {
        match self.key.extract(parts) {
            Some(key) => self.limiter.undo(&key, undo),
            None => false,
        }
    }

    fn peek(&self, parts: &Parts) -> Option<Acquire> {
        let key = self.key.extract(parts)?;
        Some(self.limiter.peek(&key))
    }

    fn release(&self, parts: &Parts, cost: u32) -> bool {
        match self.key.extract(parts) {
            Some(key) => self.limiter.release(&key, cost),
            None => false,
        }
    }

    fn is_async(&self) -> bool {
        self.limiter.is_async()
    }

    fn missing_reason(&self, parts: &Parts) -> String {
        self.key.missing_reason(parts)
    }
}

/// One rate limit a [`RateLimitLayer`](super::RateLimitLayer) applies: a name (shown in
/// the `RateLimit` headers), a limiter (any [`Backend`]: by value or in an `Arc`), and a
/// [`KeyExtractor`]. Clones share the limiter and counters.
///
/// # Example
///
/// ```
/// use std::net::IpAddr;
/// use tollgate::http::{ClientIp, Policy};
/// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
///
/// let per_ip = KeyedRateLimiter::<IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
/// let policy = Policy::new("ip", per_ip, ClientIp::peer());
/// assert_eq!(policy.name(), "ip");
/// # Ok::<(), tollgate::ConfigError>(())
/// ```
#[derive(Clone)]
pub struct Policy {
    pub(crate) name: Arc<str>,
    pub(crate) backend: Arc<dyn KeyedBackend>,
    pub(crate) shadow: bool,
    /// Whether a shadow policy's decisions go into the responses' rate-limit fields.
    shadow_headers: bool,
    cost: Option<Arc<CostFn>>,
    pub(crate) missing: MissingKey,
    /// Set for a budget policy ([`Policy::budget`]): admitted by a peek, charged after.
    pub(crate) budget: Option<BudgetSide>,
    missing_keys: Arc<AtomicU64>,
    /// Whether a missing key was reported on standard error ([`MissingKey::Fail`]).
    reported: Arc<AtomicBool>,
    #[cfg(feature = "metrics")]
    pub(crate) counters: crate::metrics::PolicyCounters,
}

impl Policy {
    /// A policy named `name` counting requests against `limiter` by `key`.
    ///
    /// The name appears as a structured-field String in the headers: characters outside
    /// printable ASCII are replaced by `?` (quotes and backslashes are escaped when written).
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::{HeaderKey, Policy};
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// let per_key = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_second(5)).build()?;
    /// let policy = Policy::new("api-key", std::sync::Arc::new(per_key), HeaderKey::new("x-api-key")?);
    /// # let _ = policy;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new<L, E>(name: impl Into<String>, limiter: L, key: E) -> Self
    where
        E: KeyExtractor,
        L: Backend<E::Key>,
    {
        Policy::with(name.into(), Arc::new(Bound { limiter, key }), None)
    }

    pub(super) fn with(
        name: String,
        backend: Arc<dyn KeyedBackend>,
        budget: Option<BudgetSide>,
    ) -> Self {
        let name: String = name
            .chars()
            .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
            .collect();
        Policy {
            backend,
            shadow: false,
            shadow_headers: false,
            cost: None,
            missing: MissingKey::default(),
            budget,
            missing_keys: Arc::new(AtomicU64::new(0)),
            reported: Arc::new(AtomicBool::new(false)),
            #[cfg(feature = "metrics")]
            counters: crate::metrics::PolicyCounters::new(&name),
            name: name.into(),
        }
    }

    /// Shadow mode: requests are decided and counted (in the metrics, feature `metrics`),
    /// but a denial is never enforced (try a new limit on live traffic). A shadow policy
    /// takes no part in the all-or-nothing rule: it is asked after the enforced policies
    /// admit.
    ///
    /// Its decisions are not sent to clients: a client that read `RateLimit` fields for
    /// a limit nobody enforces could slow down for nothing. Neither `RateLimit-Policy`,
    /// `RateLimit` nor the legacy `X-RateLimit-*` fields name it, unless
    /// [`shadow_headers(true)`](Self::shadow_headers) asks for them.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{ClientIp, Policy};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// # let per_ip = KeyedRateLimiter::<std::net::IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
    /// let trial = Policy::new("ip-trial", per_ip, ClientIp::peer()).shadow();
    /// assert!(trial.is_shadow());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn shadow(mut self) -> Self {
        self.shadow = true;
        self
    }

    /// Whether a shadow policy ([`shadow`](Self::shadow)) reports its decisions to
    /// clients in `RateLimit-Policy`, `RateLimit` (and `X-RateLimit-*` when the layer
    /// adds them), like an enforced policy: default false, since a client may back off
    /// from a limit that is not enforced. Turn it on where the clients are your own and
    /// you want to watch what they would be told. An enforced policy always reports;
    /// on it this setting does nothing.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{ClientIp, Policy, RateLimitLayer};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// # let per_ip = KeyedRateLimiter::<std::net::IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
    /// // Decided, never enforced, and shown to clients as `"ip-trial";r=..;t=..`.
    /// let trial = Policy::new("ip-trial", per_ip, ClientIp::peer())
    ///     .shadow()
    ///     .shadow_headers(true);
    /// assert!(trial.is_shadow() && trial.has_shadow_headers());
    /// let layer = RateLimitLayer::new(trial);
    /// # let _ = layer;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn shadow_headers(mut self, on: bool) -> Self {
        self.shadow_headers = on;
        self
    }

    /// Whether [`shadow_headers`](Self::shadow_headers) is on.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Policy::new("g", l, Global).shadow().has_shadow_headers());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn has_shadow_headers(&self) -> bool {
        self.shadow_headers
    }

    /// Whether this policy's decisions go into the responses' rate-limit fields: an
    /// enforced policy's always, a shadow policy's only when asked for.
    pub(crate) fn in_headers(&self) -> bool {
        !self.shadow || self.shadow_headers
    }

    /// Whether this policy is in shadow mode.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Policy::new("g", l, Global).is_shadow());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// What a request costs (default 1). A cost of 0 passes without consuming; a cost
    /// above the limiter's capacity is denied without `Retry-After` (waiting cannot help).
    ///
    /// On a budget policy ([`budget`](Self::budget)) nothing is taken at admission: the
    /// cost is what the key must have left to be admitted (say, the `max_tokens` a
    /// request asks for), and the charge is what the handler records.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(10)).build()?;
    /// // Writes cost 5, reads 1.
    /// let p = Policy::new("g", l, Global).cost(|parts| if parts.method == http::Method::GET { 1 } else { 5 });
    /// # let _ = p;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn cost<F>(mut self, cost: F) -> Self
    where
        F: Fn(&Parts) -> u32 + Send + Sync + 'static,
    {
        self.cost = Some(Arc::new(cost));
        self
    }

    /// A byte quota: the request costs its `Content-Length` (saturating at `u32::MAX`),
    /// or `unknown` when the length is not declared (a chunked upload).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{ClientIp, Policy};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// // 1 MiB per minute per client; an undeclared length counts as 64 KiB.
    /// let bytes = KeyedRateLimiter::<std::net::IpAddr>::builder(Algorithm::TokenBucket, Quota::per_minute(1 << 20)).build()?;
    /// let p = Policy::new("bytes", bytes, ClientIp::peer()).cost_from_content_length(64 << 10);
    /// # let _ = p;
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn cost_from_content_length(self, unknown: u32) -> Self {
        self.cost(move |parts| {
            parts
                .headers
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<u64>().ok())
                .map_or(unknown, |n| u32::try_from(n).unwrap_or(u32::MAX))
        })
    }

    /// What to do with a request that has no key (default [`MissingKey::Fail`]: a 500
    /// that says why; [`MissingKey::Skip`] lets it through).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{ClientIp, HeaderKey, MissingKey, Policy};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// # let per_ip = KeyedRateLimiter::<std::net::IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
    /// # let per_key = KeyedRateLimiter::<String>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
    /// let p = Policy::new("ip", per_ip, ClientIp::peer())
    ///     .on_missing_key(MissingKey::Reject(http::StatusCode::BAD_REQUEST));
    /// // Requests without an API key are limited by another policy: let them through here.
    /// let q = Policy::new("api-key", per_key, HeaderKey::new("x-api-key")?)
    ///     .on_missing_key(MissingKey::Skip);
    /// # let _ = (p, q);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn on_missing_key(mut self, outcome: MissingKey) -> Self {
        self.missing = outcome;
        self
    }

    /// The policy's name.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert_eq!(Policy::new("caf\u{e9}", l, Global).name(), "caf?");
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The limiter's quota.
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(7)).build()?;
    /// assert_eq!(Policy::new("g", l, Global).quota().limit(), 7);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn quota(&self) -> Quota {
        self.backend.quota()
    }

    /// How many requests had no key (this policy and its clones).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{ClientIp, Policy};
    /// # use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    /// # let per_ip = KeyedRateLimiter::<std::net::IpAddr>::builder(Algorithm::FixedWindow, Quota::per_minute(3)).build()?;
    /// let p = Policy::new("ip", per_ip, ClientIp::peer());
    /// assert_eq!(p.missing_keys(), 0);
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn missing_keys(&self) -> u64 {
        self.missing_keys.load(Ordering::Relaxed)
    }

    pub(crate) fn count_missing(&self) {
        self.missing_keys.fetch_add(1, Ordering::Relaxed);
        #[cfg(feature = "metrics")]
        self.counters.missing_keys.increment(1);
    }

    /// Why this request has no key, in words for the operator (cold path).
    pub(crate) fn missing_reason(&self, parts: &Parts) -> String {
        self.backend.missing_reason(parts)
    }

    /// Reports a missing key on standard error, the first time for this policy and its
    /// clones ([`MissingKey::Fail`]); whether it did.
    pub(crate) fn report_missing_once(&self, detail: &str) -> bool {
        // A load first: a server failing every request does not write the line each time.
        if self.reported.load(Ordering::Relaxed) || self.reported.swap(true, Ordering::Relaxed) {
            return false;
        }
        eprintln!(
            "tollgate::http: {detail}. Reported once per policy; Policy::missing_keys() counts \
             every such request."
        );
        true
    }

    pub(crate) fn cost_of(&self, parts: &Parts) -> u32 {
        self.cost.as_ref().map_or(1, |f| f(parts))
    }
}

impl fmt::Debug for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Policy")
            .field("name", &self.name)
            .field("quota", &self.quota())
            .field("shadow", &self.shadow)
            .field("shadow_headers", &self.shadow_headers)
            .field("missing", &self.missing)
            .field("budget", &self.is_budget())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Global;
    use crate::{limiter::RateLimiter, quota::Algorithm};

    #[test]
    fn fails_closed_by_default_and_reports_once_per_policy_and_its_clones() {
        let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1))
            .build()
            .unwrap();
        let p = Policy::new("g", l, Global);
        assert_eq!(p.missing, MissingKey::Fail);
        assert_eq!(MissingKey::default(), MissingKey::Fail);
        let clone = p.clone();
        assert!(p.report_missing_once("first"));
        assert!(!p.report_missing_once("second"));
        assert!(!clone.report_missing_once("from a clone"));
        let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1))
            .build()
            .unwrap();
        assert!(Policy::new("other", l, Global).report_missing_once("another policy"));
    }
}

/// The type-erased budget side of a budget policy ([`Policy::budget`]).
pub(crate) trait KeyedBudget: Send + Sync {
    /// This request's key bound to the limiter, to peek now and charge later; `None`
    /// when the request has no key.
    fn bind(&self, parts: &Parts, max_owed: Option<u32>) -> Option<Box<dyn BoundBudget>>;
}

impl<L, E> KeyedBudget for Bound<Arc<L>, E>
where
    E: KeyExtractor,
    L: BudgetBackend<E::Key>,
{
    fn bind(&self, parts: &Parts, max_owed: Option<u32>) -> Option<Box<dyn BoundBudget>> {
        let key = self.key.extract(parts)?;
        Some(Box::new(KeyBudget {
            limiter: Arc::clone(&self.limiter),
            key,
            max_owed,
        }))
    }
}

/// A budget policy's charging side and the most a key may owe after a charge.
#[derive(Clone)]
pub(crate) struct BudgetSide {
    pub(crate) backend: Arc<dyn KeyedBudget>,
    pub(crate) max_owed: Option<u32>,
}

impl Policy {
    /// A budget policy: a cost known only once the response is done (tokens an LLM
    /// generated, bytes streamed, rows scanned), checked before and charged after.
    ///
    /// A request is admitted when its key has anything left (at least the policy's
    /// [`cost`](Self::cost), 1 by default), by a peek that takes nothing. The layer then
    /// inserts a [`Budget`](super::Budget) handle into the request's extensions, the
    /// handler records the real cost in it, and the layer charges that total to the
    /// limiter when the response body ends or is dropped, exactly once (see
    /// [`Budget`](super::Budget) for the whole protocol). The charge is never denied:
    /// past the quota the key owes the excess, at most one burst (see
    /// [`budget_owing`](Self::budget_owing)), and its next requests are refused until it
    /// is paid off, with a `Retry-After` that says when.
    ///
    /// The limiter must be a [`BudgetBackend`]: [`RateLimiter`](crate::limiter::RateLimiter)
    /// (key [`Global`](super::Global)), [`KeyedRateLimiter`](crate::keyed::KeyedRateLimiter), or
    /// with the `redis` feature either Redis limiter (key `String`; see
    /// [`BudgetBackend`] for how each peeks and charges), by value or in an `Arc`.
    ///
    /// Other policies of the same layer are unchanged, and still all-or-nothing with
    /// it: a budget policy is asked first, and a request it refuses takes nothing from
    /// the others.
    ///
    /// # Example
    ///
    /// ```
    /// use std::sync::Arc;
    /// use tollgate::http::{HeaderKey, Policy};
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// // 100,000 tokens an hour per API key, refilled smoothly.
    /// let tokens = Arc::new(
    ///     KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_hour(100_000)).build()?,
    /// );
    /// let policy = Policy::budget("tokens", Arc::clone(&tokens), HeaderKey::new("x-api-key")?);
    /// assert!(policy.is_budget());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget<L, E>(name: impl Into<String>, limiter: L, key: E) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        Policy::budget_with(name.into(), limiter, key, None)
    }

    /// [`budget`](Self::budget), with the most a key may owe past its quota after a
    /// charge set to `max_owed` (the default is one burst): the part of a cost past it
    /// is not counted. A larger bound makes one very expensive request wait longer; a
    /// smaller one forgives more.
    ///
    /// # Example
    ///
    /// ```
    /// use tollgate::http::{HeaderKey, Policy};
    /// use tollgate::{Algorithm, KeyedRateLimiter, Quota};
    ///
    /// // 1,000 tokens a minute; one answer may put a key up to 10 minutes in debt.
    /// let tokens = KeyedRateLimiter::<String>::builder(Algorithm::TokenBucket, Quota::per_minute(1_000)).build()?;
    /// let policy = Policy::budget_owing("tokens", tokens, HeaderKey::new("x-api-key")?, 10_000);
    /// assert!(policy.is_budget());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn budget_owing<L, E>(name: impl Into<String>, limiter: L, key: E, max_owed: u32) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        Policy::budget_with(name.into(), limiter, key, Some(max_owed))
    }

    fn budget_with<L, E>(name: String, limiter: L, key: E, max_owed: Option<u32>) -> Self
    where
        E: KeyExtractor,
        L: BudgetBackend<E::Key>,
    {
        let bound = Arc::new(Bound {
            limiter: Arc::new(limiter),
            key,
        });
        let side = BudgetSide {
            backend: Arc::clone(&bound) as Arc<dyn KeyedBudget>,
            max_owed,
        };
        Policy::with(name, bound, Some(side))
    }

    /// Whether this is a budget policy ([`budget`](Self::budget)).
    ///
    /// # Example
    ///
    /// ```
    /// # use tollgate::http::{Global, Policy};
    /// # use tollgate::{Algorithm, Quota, RateLimiter};
    /// # let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(1)).build()?;
    /// assert!(!Policy::new("g", l, Global).is_budget());
    /// # Ok::<(), tollgate::ConfigError>(())
    /// ```
    #[must_use]
    pub fn is_budget(&self) -> bool {
        self.budget.is_some()
    }
}
