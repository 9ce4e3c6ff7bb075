//! The YAML shapes of one configuration file: envoyproxy/ratelimit's format, plus
//! tollgate's extensions (`algorithm`, `burst`, `on_full`, `max_keys`, `budget`,
//! `allow_limit_override`).
//!
//! Everything that can be checked while the file is read is checked here, so that serde's
//! error carries the file's line and column and the path of the field at fault.

use serde::de::{Error as _, IgnoredAny};
use serde::Deserialize;
use std::time::Duration;
use tollgate::{Algorithm, OnFull, Quota, RateLimiter};

/// One file: one domain and its descriptors.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DomainFile {
    /// The domain requests name.
    pub domain: String,
    /// The top-level descriptors.
    #[serde(default)]
    pub descriptors: Descriptors,
    /// tollgate: keys each limit of this domain holds, unless its `rate_limit` says
    /// otherwise (memory fixed at load).
    #[serde(default)]
    pub max_keys: Option<usize>,
    /// tollgate: whether a request descriptor's own `limit` replaces the configured one
    /// (envoyproxy/ratelimit always honours it; default true).
    #[serde(default)]
    pub allow_limit_override: Option<bool>,
}

/// A list of sibling descriptors, each (key, value) at most once.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(try_from = "Vec<Descriptor>")]
pub struct Descriptors(pub Vec<Descriptor>);

impl TryFrom<Vec<Descriptor>> for Descriptors {
    type Error = String;

    fn try_from(list: Vec<Descriptor>) -> Result<Self, String> {
        let mut seen = std::collections::HashSet::new();
        for d in &list {
            if d.key.is_empty() {
                return Err("descriptor has empty key".into());
            }
            let wildcard =
                d.key.contains('*') || d.value.as_deref().is_some_and(|v| v.contains('*'));
            if d.share_threshold && !wildcard {
                return Err(format!(
                    "share_threshold can only be used with wildcard values (containing '*'), but found key `{}`{}",
                    d.key,
                    d.value.as_deref().map(|v| format!(" value `{v}`")).unwrap_or_default()
                ));
            }
            if !seen.insert((d.key.as_str(), d.value.as_deref())) {
                return Err(format!(
                    "duplicate descriptor key `{}`{}",
                    d.key,
                    d.value
                        .as_deref()
                        .map(|v| format!(" value `{v}`"))
                        .unwrap_or_default()
                ));
            }
        }
        Ok(Descriptors(list))
    }
}

/// One descriptor node.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Descriptor {
    /// The entry key it matches.
    pub key: String,
    /// The entry value it matches: exact, or a wildcard pattern when it holds `*` (each
    /// `*` any run of characters); none matches every value, one limit per distinct value.
    #[serde(default)]
    pub value: Option<String>,
    /// The limit, when this node has one.
    #[serde(default)]
    pub rate_limit: Option<RateLimitSpec>,
    /// Nested descriptors (the request's next entries).
    #[serde(default)]
    pub descriptors: Descriptors,
    /// Decide and count, but never deny.
    #[serde(default)]
    pub shadow_mode: bool,
    /// A quota: the request is denied on its quota-mode limits only when every one of
    /// them is over (envoyproxy/ratelimit's `quota_mode`).
    #[serde(default)]
    pub quota_mode: bool,
    /// Arbitrary data for Envoy's dynamic metadata (envoyproxy/ratelimit's `metadata`):
    /// accepted and kept, shown by `/rlconfig`; this server sends no dynamic metadata.
    #[serde(default)]
    pub metadata: Option<serde_norway::Value>,
    /// Metrics labelled with the request's own values rather than the configured ones.
    #[serde(default)]
    pub detailed_metric: bool,
    /// With a wildcard value: every matching value shares one limit.
    #[serde(default)]
    pub share_threshold: bool,
    /// Accepted for compatibility with envoyproxy/ratelimit; not used.
    #[serde(default)]
    pub value_to_metric: Option<IgnoredAny>,
}

/// The time unit of a limit (case-insensitive in the file, as envoyproxy/ratelimit reads it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Unit {
    /// One second.
    Second,
    /// One minute.
    Minute,
    /// One hour.
    Hour,
    /// One day.
    Day,
    /// Seven days.
    Week,
    /// Thirty days (envoyproxy/ratelimit's month).
    Month,
    /// 365 days.
    Year,
}

impl Unit {
    /// The unit's length.
    pub fn period(self) -> Duration {
        Duration::from_secs(match self {
            Unit::Second => 1,
            Unit::Minute => 60,
            Unit::Hour => 3_600,
            Unit::Day => 86_400,
            Unit::Week => 7 * 86_400,
            Unit::Month => 30 * 86_400,
            Unit::Year => 365 * 86_400,
        })
    }

    /// The unit's number in `RateLimitResponse.RateLimit.Unit`.
    pub fn proto(self) -> i32 {
        match self {
            Unit::Second => 1,
            Unit::Minute => 2,
            Unit::Hour => 3,
            Unit::Day => 4,
            Unit::Month => 5,
            Unit::Year => 6,
            Unit::Week => 7,
        }
    }

    /// The unit of a protobuf unit number (`RateLimitUnit` or the response's `Unit`).
    pub fn from_proto(n: i32) -> Option<Unit> {
        Some(match n {
            1 => Unit::Second,
            2 => Unit::Minute,
            3 => Unit::Hour,
            4 => Unit::Day,
            5 => Unit::Month,
            6 => Unit::Year,
            7 => Unit::Week,
            _ => return None,
        })
    }

    /// The protobuf name (`MINUTE`).
    pub fn name(self) -> &'static str {
        match self {
            Unit::Second => "SECOND",
            Unit::Minute => "MINUTE",
            Unit::Hour => "HOUR",
            Unit::Day => "DAY",
            Unit::Week => "WEEK",
            Unit::Month => "MONTH",
            Unit::Year => "YEAR",
        }
    }

    /// Parses a unit name, any case.
    pub fn parse(s: &str) -> Option<Unit> {
        Some(match s.to_ascii_lowercase().as_str() {
            "second" => Unit::Second,
            "minute" => Unit::Minute,
            "hour" => Unit::Hour,
            "day" => Unit::Day,
            "week" => Unit::Week,
            "month" => Unit::Month,
            "year" => Unit::Year,
            _ => return None,
        })
    }
}

impl<'de> Deserialize<'de> for Unit {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Unit::parse(&s).ok_or_else(|| {
            D::Error::custom(format!(
                "unknown unit `{s}` (expected second, minute, hour, day, week, month or year)"
            ))
        })
    }
}

/// `algorithm:`, tollgate's extension: which engine decides this limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmName {
    /// GCRA token bucket.
    TokenBucket,
    /// GCRA leaky bucket.
    LeakyBucket,
    /// Fixed windows aligned to the epoch (envoyproxy/ratelimit's behaviour, the default).
    FixedWindow,
    /// Sliding window counter.
    SlidingWindow,
    /// Exact sliding log.
    SlidingLog,
}

impl AlgorithmName {
    /// The library's algorithm.
    pub fn algorithm(self) -> Algorithm {
        match self {
            AlgorithmName::TokenBucket => Algorithm::TokenBucket,
            AlgorithmName::LeakyBucket => Algorithm::LeakyBucket,
            AlgorithmName::FixedWindow => Algorithm::FixedWindow,
            AlgorithmName::SlidingWindow => Algorithm::SlidingWindow,
            AlgorithmName::SlidingLog => Algorithm::SlidingLog,
        }
    }
}

/// `on_full:`, tollgate's extension: what a full key table does with a new key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFullName {
    /// Evict the entry whose loss over-admits least (the default).
    Evict,
    /// Deny the new key.
    Deny,
    /// Admit the new key untracked.
    Allow,
}

impl OnFullName {
    /// The library's policy.
    pub fn on_full(self) -> OnFull {
        match self {
            OnFullName::Evict => OnFull::Evict,
            OnFullName::Deny => OnFull::Deny,
            OnFullName::Allow => OnFull::Allow,
        }
    }
}

/// A `replaces:` entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replace {
    /// The name of the limit this one replaces (never empty once checked).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub name: String,
}

/// A name written as `name:` alone (YAML null) is the empty name, refused by the check.
fn null_as_empty<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(d)?.unwrap_or_default())
}

/// The `rate_limit:` block as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    unit: Option<Unit>,
    requests_per_unit: Option<u32>,
    name: Option<String>,
    #[serde(default)]
    unlimited: bool,
    #[serde(default)]
    replaces: Vec<Replace>,
    algorithm: Option<AlgorithmName>,
    burst: Option<u32>,
    on_full: Option<OnFullName>,
    max_keys: Option<usize>,
    budget: Option<bool>,
}

/// A checked `rate_limit:` block.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(try_from = "RawRateLimit")]
pub struct RateLimitSpec {
    /// The unit (`None` only when unlimited).
    pub unit: Option<Unit>,
    /// Requests per unit (0: every request is over the limit).
    pub requests_per_unit: u32,
    /// The limit's name, reported back and used by `replaces`.
    pub name: Option<String>,
    /// Matches, but never limits.
    pub unlimited: bool,
    /// Limits this one replaces when both match one request.
    pub replaces: Vec<Replace>,
    /// The engine's algorithm.
    pub algorithm: AlgorithmName,
    /// The most admitted at once (buckets only).
    pub burst: Option<u32>,
    /// What a full table does.
    pub on_full: OnFullName,
    /// Keys this limit holds.
    pub max_keys: Option<usize>,
    /// tollgate: a token budget. A descriptor's hits are charged whatever is left (the
    /// key may owe past its quota, at most one burst) instead of being denied; a check of
    /// 0 hits is denied while the key owes.
    pub budget: bool,
}

impl RateLimitSpec {
    /// The library quota (`None` when unlimited or zero).
    pub fn quota(&self) -> Option<Quota> {
        let unit = self.unit?;
        if self.unlimited || self.requests_per_unit == 0 {
            return None;
        }
        let q = Quota::new(self.requests_per_unit, unit.period());
        Some(match self.burst {
            Some(b) => q.with_burst(b),
            None => q,
        })
    }
}

impl TryFrom<RawRateLimit> for RateLimitSpec {
    type Error = String;

    fn try_from(r: RawRateLimit) -> Result<Self, String> {
        // envoyproxy/ratelimit's refusals, with its reasons.
        if r.unlimited && r.unit.is_some() {
            return Err("rate_limit: should not specify rate limit unit when unlimited".into());
        }
        for x in &r.replaces {
            if x.name.is_empty() {
                return Err("rate_limit: should not have an empty replaces entry".into());
            }
            if r.name.as_deref() == Some(x.name.as_str()) {
                return Err(format!(
                    "rate_limit: replaces should not contain name of same descriptor (`{}`)",
                    x.name
                ));
            }
        }
        if !r.unlimited {
            if r.unit.is_none() {
                return Err("rate_limit: missing field `unit`".into());
            }
            if r.requests_per_unit.is_none() {
                return Err("rate_limit: missing field `requests_per_unit`".into());
            }
        }
        if r.max_keys == Some(0) {
            return Err("rate_limit.max_keys: must be at least 1".into());
        }
        let budget = r.budget.unwrap_or(false);
        if budget && r.unlimited {
            return Err("rate_limit.budget: an unlimited limit counts nothing to charge".into());
        }
        if budget && r.algorithm == Some(AlgorithmName::SlidingLog) {
            // A budget's check of 0 hits asks the engine what the key owes (a charge of
            // 0); the library's sliding log keeps no count of an overdraft past its ring
            // (`Charge::owed`), so a check could not tell a debt from an empty log.
            return Err(
                "rate_limit.budget: a budget cannot use the sliding log (token_bucket, leaky_bucket, fixed_window or sliding_window)"
                    .into(),
            );
        }
        let spec = RateLimitSpec {
            unit: r.unit,
            requests_per_unit: r.requests_per_unit.unwrap_or(0),
            name: r.name,
            unlimited: r.unlimited,
            replaces: r.replaces,
            algorithm: r.algorithm.unwrap_or(AlgorithmName::FixedWindow),
            burst: r.burst,
            on_full: r.on_full.unwrap_or(OnFullName::Evict),
            max_keys: r.max_keys,
            budget,
        };
        if let Some(q) = spec.quota() {
            // The library's own checks (a burst on a window, a zero burst, ...).
            RateLimiter::builder(spec.algorithm.algorithm(), q)
                .build()
                .map_err(|e| format!("rate_limit: {e}"))?;
        } else if spec.burst.is_some() && spec.requests_per_unit == 0 && !spec.unlimited {
            return Err("rate_limit.burst: a limit of 0 requests takes no burst".into());
        }
        Ok(spec)
    }
}
