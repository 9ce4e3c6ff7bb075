//! envoyproxy/ratelimit's metrics, under the names its Prometheus exporter mapping gives
//! them (`ratelimit_service_rate_limit_total_hits{domain="d",key1="k_v",key2="k2"}`, and
//! `over_limit`, `near_limit`, `within_limit`, `shadow_mode`), through the `metrics` facade,
//! so existing dashboards work. The labels come from a [`StatKey`]: the domain and one level
//! per descriptor entry (`key_value` or `key`), the configured path or, for a limit with
//! `detailed_metric`, the request's own values. A level is one label whatever it holds: a
//! value with dots (an IP address) is not split.

use metrics::{counter, Counter, Label};

/// The ratio of the limit above which an admitted hit also counts as `near_limit`
/// (envoyproxy/ratelimit's default `NEAR_LIMIT_RATIO`).
pub const NEAR_LIMIT_RATIO: f64 = 0.8;

/// The five counters of one stat key.
#[derive(Debug, Clone)]
pub struct Counters {
    total_hits: Counter,
    over_limit: Counter,
    near_limit: Counter,
    within_limit: Counter,
    shadow_mode: Counter,
}

/// envoyproxy/ratelimit's stat key, kept as its parts: the domain and one level per
/// descriptor entry.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct StatKey {
    /// The domain.
    pub domain: String,
    /// One level per entry: `key_value`, or `key` for a key matched without a value.
    pub levels: Vec<String>,
}

impl StatKey {
    /// A key of `domain` with no levels yet.
    pub fn new(domain: &str) -> StatKey {
        StatKey {
            domain: domain.to_string(),
            levels: Vec::new(),
        }
    }

    /// This key with one more level.
    #[must_use]
    pub fn with(&self, level: String) -> StatKey {
        let mut k = self.clone();
        k.levels.push(level);
        k
    }

    /// envoyproxy/ratelimit's dotted form, `domain.key_value.key` (a name, never parsed).
    pub fn dotted(&self) -> String {
        let mut s = self.domain.clone();
        for l in &self.levels {
            s.push('.');
            s.push_str(l);
        }
        s
    }
}

/// The labels of a stat key: `domain`, then `key1`, `key2`, ... one per level.
pub fn labels(key: &StatKey) -> Vec<Label> {
    let mut out = Vec::with_capacity(1 + key.levels.len());
    out.push(Label::new("domain", key.domain.clone()));
    for (i, p) in key.levels.iter().enumerate() {
        out.push(Label::new(format!("key{}", i + 1), p.clone()));
    }
    out
}

impl Counters {
    /// Registers (or finds) the counters of `key`.
    pub fn new(key: &StatKey) -> Counters {
        let l = labels(key);
        Counters {
            total_hits: counter!("ratelimit_service_rate_limit_total_hits", l.clone()),
            over_limit: counter!("ratelimit_service_rate_limit_over_limit", l.clone()),
            near_limit: counter!("ratelimit_service_rate_limit_near_limit", l.clone()),
            within_limit: counter!("ratelimit_service_rate_limit_within_limit", l.clone()),
            shadow_mode: counter!("ratelimit_service_rate_limit_shadow_mode", l),
        }
    }

    /// Counts one decision of `hits` on a limit of `limit` that left `remaining`.
    pub fn record(&self, hits: u64, allowed: bool, shadow: bool, limit: u32, remaining: u32) {
        self.total_hits.increment(hits);
        if allowed {
            self.within_limit.increment(hits);
            let used = u64::from(limit.saturating_sub(remaining));
            if used as f64 > f64::from(limit) * NEAR_LIMIT_RATIO {
                self.near_limit.increment(hits);
            }
        } else {
            self.over_limit.increment(hits);
            if shadow {
                self.shadow_mode.increment(hits);
            }
        }
    }
}

/// Counts one call by its outcome: `decide` (`ok`, `over_limit`), `grpc` and `json`
/// (`error`: refused before deciding), `reload` (`ok`, `error`). The handles are registered
/// once, so the hot path only increments an atomic.
pub fn call(api: &'static str, outcome: &'static str) {
    use std::sync::OnceLock;
    static DECIDE_OK: OnceLock<Counter> = OnceLock::new();
    static DECIDE_OVER: OnceLock<Counter> = OnceLock::new();
    let handle = |cell: &'static OnceLock<Counter>| {
        cell.get_or_init(
            || counter!("tollgate_server_calls_total", "api" => api, "outcome" => outcome),
        )
        .increment(1);
    };
    match (api, outcome) {
        ("decide", "ok") => handle(&DECIDE_OK),
        ("decide", "over_limit") => handle(&DECIDE_OVER),
        _ => {
            counter!("tollgate_server_calls_total", "api" => api, "outcome" => outcome).increment(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_key_labels() {
        let k = StatKey::new("d").with("k_v".into()).with("k2".into());
        let l = labels(&k);
        let pairs: Vec<(&str, &str)> = l.iter().map(|l| (l.key(), l.value())).collect();
        assert_eq!(pairs, [("domain", "d"), ("key1", "k_v"), ("key2", "k2")]);
        assert_eq!(k.dotted(), "d.k_v.k2");
    }

    #[test]
    fn a_dotted_value_is_one_label() {
        let k = StatKey::new("d").with("remote_address_50.0.0.5".into());
        let l = labels(&k);
        let pairs: Vec<(&str, &str)> = l.iter().map(|l| (l.key(), l.value())).collect();
        assert_eq!(
            pairs,
            [("domain", "d"), ("key1", "remote_address_50.0.0.5")]
        );
    }
}
