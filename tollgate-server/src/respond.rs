//! A decided request becomes a `RateLimitResponse`, each status as envoyproxy/ratelimit
//! writes it: an `OVER_LIMIT` status reports 0 remaining, a check of 0 hits reports the key
//! as it is, and `duration_until_reset` is whole seconds (for a fixed window, the default
//! and upstream's only algorithm: the end of the current clock-aligned window, `unit −
//! now mod unit`, whatever the key's state).

use crate::decide::{Item, Outcome};
use crate::headers::{headers, HeaderMode};
use crate::proto::{Code, DescriptorStatus, RateLimit, RateLimitResponse};
use crate::rules::Rule;
use crate::stats::{Counters, StatKey};
use std::collections::HashMap;
use std::sync::RwLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tollgate::Algorithm;

/// Request-specific stat keys whose counter handles are kept (beyond, a key's counters are
/// looked up in the registry on each call, as the first call of every key does).
const MAX_DETAILED: usize = 65_536;

/// Counter handles of request-specific stat keys (`detailed_metric`, overrides), so that a
/// decision does not register five counters (labels built, registry searched) each time.
#[derive(Debug, Default)]
pub struct DetailedCounters(RwLock<HashMap<StatKey, Counters>>);

impl DetailedCounters {
    /// The counters of `key`: kept after the first call.
    pub fn get(&self, key: &StatKey) -> Counters {
        let known = self.0.read().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = known.get(key) {
            return c.clone();
        }
        let full = known.len() >= MAX_DETAILED;
        drop(known);
        let c = Counters::new(key);
        if !full {
            let mut map = self.0.write().unwrap_or_else(|e| e.into_inner());
            map.entry(key.clone()).or_insert_with(|| c.clone());
        }
        c
    }
}

/// Whole seconds since the Unix epoch, now.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// `d` in whole seconds, rounded up.
fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

/// Whole seconds until the limit resets, as reported: for a fixed window (and whatever was
/// not asked of the engine) envoyproxy/ratelimit's `unit − now mod unit`; for the other
/// algorithms the engine's `reset_after`, rounded up. `now_unix` is read only when needed:
/// a fixed window's decision with a count already says when its window ends (its windows
/// are aligned to the Unix epoch in whole seconds, so the engine's `reset_after` rounded up
/// is that same number).
pub fn reset_secs(rule: &Rule, out: &Outcome, now_unix: &mut impl FnMut() -> u64) -> u64 {
    let period = rule.spec.unit.map_or(0, |u| u.period().as_secs());
    match out.decision() {
        Some(d) if rule.params.algorithm != Algorithm::FixedWindow => ceil_secs(d.reset_after()),
        Some(d) if !d.reset_after().is_zero() => ceil_secs(d.reset_after()).min(period),
        _ if period == 0 => 0,
        _ => period - now_unix() % period,
    }
}

/// The status of one descriptor's limit, and whether it is over the limit (before shadow
/// mode turns the code to `OK`).
pub fn status(
    rule: &Rule,
    out: &Outcome,
    now_unix: &mut impl FnMut() -> u64,
) -> (DescriptorStatus, bool) {
    let limit = RateLimit {
        name: rule.spec.name.clone().unwrap_or_default(),
        requests_per_unit: rule.spec.requests_per_unit,
        unit: rule.spec.unit.map_or(0, crate::config::Unit::proto),
    };
    let denied = out.denied();
    let remaining = out.remaining();
    let code = if denied && !rule.shadow_mode {
        Code::OverLimit
    } else {
        Code::Ok
    };
    let reset = reset_secs(rule, out, now_unix);
    let status = DescriptorStatus {
        code: code as i32,
        current_limit: Some(limit),
        limit_remaining: remaining,
        duration_until_reset: Some(prost_types::Duration {
            seconds: i64::try_from(reset).unwrap_or(i64::MAX),
            nanos: 0,
        }),
    };
    (status, denied)
}

/// A status with no limit.
fn ok_status() -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: None,
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

/// The response to a request whose items were decided as `outcomes`; counts each limit's
/// hits in its metrics.
pub fn respond(
    items: &[Item],
    outcomes: &[Outcome],
    allowed: bool,
    header_mode: HeaderMode,
    detailed: &DetailedCounters,
) -> RateLimitResponse {
    let mut read: Option<u64> = None;
    let mut now = || *read.get_or_insert_with(unix_now);
    let mut statuses = Vec::with_capacity(items.len());
    for (it, out) in items.iter().zip(outcomes) {
        let Some(rule) = &it.rule else {
            statuses.push(ok_status());
            continue;
        };
        if rule.spec.unlimited {
            let mut s = ok_status();
            s.limit_remaining = u32::MAX;
            statuses.push(s);
            continue;
        }
        let (s, denied) = status(rule, out, &mut now);
        // A give-back adds no hits: it is not counted in the hit metrics.
        if !matches!(out, Outcome::None | Outcome::GivenBack(_)) {
            let counters;
            let c = match &it.detailed {
                Some(k) => {
                    counters = detailed.get(k);
                    &counters
                }
                None => &rule.counters,
            };
            c.record(
                it.hits,
                !denied,
                rule.shadow_mode,
                rule.spec.requests_per_unit,
                s.limit_remaining,
            );
        }
        statuses.push(s);
    }
    let overall = if allowed { Code::Ok } else { Code::OverLimit };
    crate::stats::call("decide", if allowed { "ok" } else { "over_limit" });
    RateLimitResponse {
        overall_code: overall as i32,
        // The headers describe a status with a limit: its item has a rule.
        response_headers_to_add: headers(header_mode, &statuses, |i| {
            items[i]
                .rule
                .as_ref()
                .map_or("", |r| r.spec.name.as_deref().unwrap_or(&r.stat_key))
        }),
        statuses,
        request_headers_to_add: Vec::new(),
    }
}
