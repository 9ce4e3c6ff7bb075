//! Counters through the [`metrics`](https://docs.rs/metrics) facade (feature `metrics`).
//!
//! Recorded by [`RateLimitLayer`](crate::http::RateLimitLayer) (feature `tower`), one
//! series per policy and outcome, never per key:
//!
//! | name | labels | counts |
//! | --- | --- | --- |
//! | `tollgate_decisions_total` | `policy`, `outcome` = `allowed`, `limited` or `shadow` | requests decided; `shadow`: a shadow policy would have limited |
//! | `tollgate_backend_errors_total` | `policy` | backend failures (a Redis error with no fallback) |
//! | `tollgate_missing_keys_total` | `policy` | requests the policy could not key |
//!
//! The handles are registered once, when the policy is built, so the request path only
//! increments them: install the recorder (your exporter) before building the layer.
//! Without a recorder every handle is a no-op. [`describe`] gives each series its help
//! text.
//!
//! # Example
//!
//! ```
//! # #[cfg(feature = "tower")]
//! # fn main() -> Result<(), tollgate::ConfigError> {
//! use tollgate::http::{Global, Policy, RateLimitLayer};
//! use tollgate::{Algorithm, Quota, RateLimiter};
//!
//! // metrics_exporter_prometheus::PrometheusBuilder::new().install()?; // first
//! tollgate::metrics::describe();
//! let all = RateLimiter::builder(Algorithm::TokenBucket, Quota::per_second(100)).build()?;
//! let layer = RateLimitLayer::new(Policy::new("global", all, Global));
//! # let _ = layer;
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "tower"))]
//! # fn main() {}
//! ```

use metrics::{counter, describe_counter, Counter, Unit};

/// Name of the decisions counter.
///
/// # Example
///
/// ```
/// assert_eq!(tollgate::metrics::DECISIONS, "tollgate_decisions_total");
/// ```
pub const DECISIONS: &str = "tollgate_decisions_total";
/// Name of the backend-errors counter.
///
/// # Example
///
/// ```
/// assert_eq!(tollgate::metrics::BACKEND_ERRORS, "tollgate_backend_errors_total");
/// ```
pub const BACKEND_ERRORS: &str = "tollgate_backend_errors_total";
/// Name of the missing-keys counter.
///
/// # Example
///
/// ```
/// assert_eq!(tollgate::metrics::MISSING_KEYS, "tollgate_missing_keys_total");
/// ```
pub const MISSING_KEYS: &str = "tollgate_missing_keys_total";

/// Registers the help text of every tollgate series with the installed recorder.
///
/// # Example
///
/// ```
/// tollgate::metrics::describe();
/// ```
pub fn describe() {
    describe_counter!(
        DECISIONS,
        Unit::Count,
        "Requests decided, by policy and outcome (allowed, limited, shadow)."
    );
    describe_counter!(
        BACKEND_ERRORS,
        Unit::Count,
        "Rate-limit backend failures, by policy."
    );
    describe_counter!(
        MISSING_KEYS,
        Unit::Count,
        "Requests a policy could not key, by policy."
    );
}

/// The pre-registered handles of one policy.
#[derive(Clone, Debug)]
#[cfg_attr(not(feature = "tower"), allow(dead_code))]
pub(crate) struct PolicyCounters {
    pub(crate) allowed: Counter,
    pub(crate) limited: Counter,
    pub(crate) shadow: Counter,
    pub(crate) backend_errors: Counter,
    pub(crate) missing_keys: Counter,
}

#[cfg_attr(not(feature = "tower"), allow(dead_code))]
impl PolicyCounters {
    pub(crate) fn new(policy: &str) -> Self {
        let p = policy.to_owned();
        PolicyCounters {
            allowed: counter!(DECISIONS, "policy" => p.clone(), "outcome" => "allowed"),
            limited: counter!(DECISIONS, "policy" => p.clone(), "outcome" => "limited"),
            shadow: counter!(DECISIONS, "policy" => p.clone(), "outcome" => "shadow"),
            backend_errors: counter!(BACKEND_ERRORS, "policy" => p.clone()),
            missing_keys: counter!(MISSING_KEYS, "policy" => p),
        }
    }
}
