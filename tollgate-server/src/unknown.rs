//! Requests that no limit applies to, made visible: a typo in a domain or a key switches
//! limiting off for those requests (they are `OK`, as envoyproxy/ratelimit answers), so
//! each is counted, and each unknown domain is logged once.

use metrics::{counter, Counter};
use std::collections::HashMap;
use std::sync::RwLock;

/// Distinct unknown domains remembered (logged once, counted under their name); the
/// domains past it are counted under [`OTHER`] and not logged, so that a client sending
/// random domains cannot grow the process or the metrics without bound.
pub const MAX_UNKNOWN_DOMAINS: usize = 1_024;

/// The `domain` label of unknown domains past [`MAX_UNKNOWN_DOMAINS`].
pub const OTHER: &str = "_other";

/// The unknown domains seen, with their counter.
#[derive(Debug, Default)]
pub struct UnknownDomains(RwLock<HashMap<String, Counter>>);

/// The counter of requests to an unknown domain (envoyproxy/ratelimit's
/// `<domain>.domain_not_found`).
fn not_found(domain: &str) -> Counter {
    counter!("ratelimit_service_rate_limit_domain_not_found", "domain" => domain.to_string())
}

/// The counter of descriptors of a known `domain` that matched no limit.
pub fn unmatched_counter(domain: &str) -> Counter {
    counter!("tollgate_server_descriptors_unmatched_total", "domain" => domain.to_string())
}

impl UnknownDomains {
    /// Counts a request to `domain`, which the configuration does not have; logs the
    /// first one of each domain.
    pub fn seen(&self, domain: &str) {
        if let Some(c) = self.0.read().unwrap_or_else(|e| e.into_inner()).get(domain) {
            c.increment(1);
            return;
        }
        let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = map.get(domain) {
            c.increment(1);
        } else if map.len() < MAX_UNKNOWN_DOMAINS {
            tracing::warn!(
                domain,
                "request for a domain the configuration does not have: answered OK with no limit (logged once per domain)"
            );
            let c = not_found(domain);
            c.increment(1);
            map.insert(domain.to_string(), c);
        } else {
            not_found(OTHER).increment(1);
        }
    }

    /// Forgets the domains seen (after a reload, a domain may be known, or unknown again).
    pub fn clear(&self) {
        self.0.write().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
