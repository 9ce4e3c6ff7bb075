//! envoyproxy/ratelimit's metrics, under the names its Prometheus exporter mapping gives
//! them (`ratelimit_service_rate_limit_total_hits{domain="d",key1="k_v",key2="k2"}`, and
//! `over_limit`, `near_limit`, `within_limit`, `shadow_mode`), through the `metrics` facade,
//! so existing dashboards work. The labels come from the stat key `domain.key_value.key...`:
//! the configured path, or the request's own values for a limit with `detailed_metric`.

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

/// The labels of a stat key: `domain`, then `key1`, `key2`, ... one per level.
pub fn labels(stat_key: &str) -> Vec<Label> {
    let mut parts = stat_key.split('.');
    let mut out = vec![Label::new("domain", parts.next().unwrap_or("").to_string())];
    for (i, p) in parts.enumerate() {
        out.push(Label::new(format!("key{}", i + 1), p.to_string()));
    }
    out
}

impl Counters {
    /// Registers (or finds) the counters of `stat_key`.
    pub fn new(stat_key: &str) -> Counters {
        let l = labels(stat_key);
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
        let l = labels("d.k_v.k2");
        let pairs: Vec<(&str, &str)> = l.iter().map(|l| (l.key(), l.value())).collect();
        assert_eq!(pairs, [("domain", "d"), ("key1", "k_v"), ("key2", "k2")]);
    }
}
