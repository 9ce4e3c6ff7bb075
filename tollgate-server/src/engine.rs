//! One rate limit decision: a `RateLimitRequest` becomes one limit and key per descriptor,
//! decided all or nothing across the descriptors (a denial takes nothing from the others),
//! and a `RateLimitResponse`. Shared by the gRPC service and `/json`.

use crate::backend::{Backend, LimitParams, Limiter};
use crate::config::{RateLimitSpec, Unit};
use crate::decide::{decide_enforced, decide_shadow, Outcome};
use crate::headers::{headers, HeaderMode};
use crate::proto::{Code, DescriptorStatus, RateLimit, RateLimitRequest, RateLimitResponse};
use crate::rules::{push_entry, Rule, Rules};
use crate::stats::Counters;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

/// Bounds on what one request may carry.
#[derive(Debug, Clone, Copy)]
pub struct InputLimits {
    /// Descriptors per request.
    pub max_descriptors: usize,
    /// Entries per descriptor.
    pub max_entries: usize,
    /// Bytes of one entry key or value.
    pub max_entry_bytes: usize,
}

impl Default for InputLimits {
    fn default() -> Self {
        InputLimits {
            max_descriptors: 256,
            max_entries: 64,
            max_entry_bytes: 4_096,
        }
    }
}

/// Why a call was not decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideError {
    /// The request is malformed (gRPC INVALID_ARGUMENT, HTTP 400).
    InvalidArgument(String),
    /// The backend could not decide (gRPC UNAVAILABLE, HTTP 500).
    Unavailable(String),
}

impl std::fmt::Display for DecideError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecideError::InvalidArgument(m) => write!(f, "invalid request: {m}"),
            DecideError::Unavailable(m) => write!(f, "backend unavailable: {m}"),
        }
    }
}

/// One descriptor's limit for this call.
#[derive(Debug)]
pub struct Item {
    /// The limit (`None`: nothing matched, or replaced).
    pub rule: Option<Arc<Rule>>,
    /// The counting key.
    pub key: String,
    /// Hits to add.
    pub hits: u64,
    /// The request's own stat key (`detailed_metric`, overrides).
    pub detailed: Option<String>,
}

/// The server's decision state: the compiled configuration (swapped on reload), the
/// backend, and the limits created for descriptors' own `limit` overrides.
#[derive(Debug)]
pub struct Engine {
    rules: RwLock<Arc<Rules>>,
    backend: Backend,
    overrides: Mutex<HashMap<(String, u32, i32), Arc<Rule>>>,
    /// Counter handles of request-specific stat keys (`detailed_metric`, overrides), so
    /// that a decision does not register five counters (labels built, registry searched).
    detailed: RwLock<HashMap<String, Counters>>,
    header_mode: HeaderMode,
    input: InputLimits,
}

/// Distinct override limits kept at once (beyond, a new one is refused).
const MAX_OVERRIDES: usize = 4_096;

/// Request-specific stat keys whose counter handles are kept (beyond, a key's counters are
/// looked up in the registry on each call, as the first call of every key does).
const MAX_DETAILED: usize = 65_536;

impl Engine {
    /// An engine serving `rules`.
    pub fn new(
        rules: Rules,
        backend: Backend,
        header_mode: HeaderMode,
        input: InputLimits,
    ) -> Self {
        Engine {
            rules: RwLock::new(Arc::new(rules)),
            backend,
            overrides: Mutex::new(HashMap::new()),
            detailed: RwLock::new(HashMap::new()),
            header_mode,
            input,
        }
    }

    /// The configuration being served.
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.rules.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves `rules` from now on.
    pub fn swap(&self, rules: Rules) {
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(rules);
    }

    /// The backend.
    pub fn backend(&self) -> &Backend {
        &self.backend
    }

    fn validate(&self, req: &RateLimitRequest) -> Result<(), DecideError> {
        let bad = |m: String| Err(DecideError::InvalidArgument(m));
        if req.domain.is_empty() {
            return bad("rate limit domain must not be empty".into());
        }
        if req.descriptors.is_empty() {
            return bad("rate limit descriptor list must not be empty".into());
        }
        if req.descriptors.len() > self.input.max_descriptors {
            return bad(format!(
                "{} descriptors; at most {} are accepted",
                req.descriptors.len(),
                self.input.max_descriptors
            ));
        }
        let max = self.input.max_entry_bytes;
        if req.domain.len() > max {
            return bad(format!("domain longer than {max} bytes"));
        }
        for (i, d) in req.descriptors.iter().enumerate() {
            if d.entries.len() > self.input.max_entries {
                return bad(format!(
                    "descriptor {i} has {} entries; at most {} are accepted",
                    d.entries.len(),
                    self.input.max_entries
                ));
            }
            if d.is_negative_hits {
                return bad(format!(
                    "descriptor {i}: is_negative_hits (giving hits back) is not supported"
                ));
            }
            if d.entries
                .iter()
                .any(|e| e.key.len() > max || e.value.len() > max)
            {
                return bad(format!(
                    "descriptor {i} has an entry key or value longer than {max} bytes"
                ));
            }
        }
        Ok(())
    }

    /// The limit a descriptor's own `limit` asks for (created on first use).
    async fn override_rule(
        &self,
        domain: &str,
        rpu: u32,
        unit: Unit,
    ) -> Result<Arc<Rule>, DecideError> {
        let k = (domain.to_string(), rpu, unit.proto());
        if let Some(r) = self
            .overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&k)
        {
            return Ok(Arc::clone(r));
        }
        let spec = RateLimitSpec {
            unit: Some(unit),
            requests_per_unit: rpu,
            name: None,
            unlimited: false,
            replaces: Vec::new(),
            algorithm: crate::config::yaml::AlgorithmName::FixedWindow,
            burst: None,
            on_full: crate::config::yaml::OnFullName::Evict,
            max_keys: None,
        };
        let id = format!("override|{domain}|{rpu}|{}", unit.name());
        let params = LimitParams {
            algorithm: spec.algorithm.algorithm(),
            quota: spec.quota(),
            max_keys: crate::rules::DEFAULT_MAX_KEYS,
            on_full: spec.on_full.on_full(),
        };
        let limiter = self
            .backend
            .limiter(&id, params)
            .await
            .map_err(DecideError::Unavailable)?;
        let rule = Arc::new(Rule {
            counters: Counters::new(&format!("{domain}.override")),
            id,
            spec,
            stat_key: format!("{domain}.override"),
            shadow_mode: false,
            detailed_metric: true,
            limiter,
        });
        let mut map = self.overrides.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= MAX_OVERRIDES && !map.contains_key(&k) {
            return Err(DecideError::InvalidArgument(format!(
                "too many distinct limit overrides (at most {MAX_OVERRIDES})"
            )));
        }
        Ok(Arc::clone(map.entry(k).or_insert(rule)))
    }

    /// Decides `req`.
    ///
    /// # Errors
    ///
    /// [`DecideError::InvalidArgument`] for a malformed request,
    /// [`DecideError::Unavailable`] when the backend cannot decide under the `error`
    /// failure policy.
    pub async fn decide(&self, req: &RateLimitRequest) -> Result<RateLimitResponse, DecideError> {
        self.validate(req)?;
        let rules = self.rules();
        let domain = rules.domains.get(&req.domain);
        let redis = self.backend.mode() != crate::backend::Mode::Local;
        let base_hits = u64::from(req.hits_addend.max(1));
        let mut items = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let hits = d.hits_addend.unwrap_or(base_hits);
            let over = match (&d.limit, domain) {
                (Some(o), Some(dom)) if dom.allow_override => {
                    Unit::from_proto(o.unit).map(|u| (o.requests_per_unit, u))
                }
                (Some(o), None) => Unit::from_proto(o.unit).map(|u| (o.requests_per_unit, u)),
                _ => None,
            };
            let (rule, mut key) = if let Some((rpu, unit)) = over {
                // Boxed: building a limiter (on Redis too) is a large future, and rare.
                let rule = Box::pin(self.override_rule(&req.domain, rpu, unit)).await?;
                let mut key = String::new();
                for e in &d.entries {
                    push_entry(&mut key, &e.key, &e.value);
                }
                (Some(rule), key)
            } else {
                match domain.and_then(|dom| dom.find(&d.entries)) {
                    Some(m) => (Some(Arc::clone(m.rule)), m.key),
                    None => (None, String::new()),
                }
            };
            if redis {
                // One Redis Cluster slot for every key of a domain: the `{domain}` hash tag.
                key = format!("{{{}}}{key}", req.domain);
            }
            let detailed = rule
                .as_ref()
                .filter(|r| r.detailed_metric)
                .map(|_| detailed_key(&req.domain, d));
            items.push(Item {
                rule,
                key,
                hits,
                detailed,
            });
        }
        // `replaces`: a matched limit named in another matched limit's list does not apply.
        let replaced: Vec<&str> = items
            .iter()
            .filter_map(|i| i.rule.as_ref())
            .flat_map(|r| r.spec.replaces.iter().map(|x| x.name.as_str()))
            .collect();
        if !replaced.is_empty() {
            let names: Vec<String> = replaced.iter().map(|s| s.to_string()).collect();
            for it in &mut items {
                if it
                    .rule
                    .as_ref()
                    .and_then(|r| r.spec.name.as_deref())
                    .is_some_and(|n| names.iter().any(|x| x == n))
                {
                    it.rule = None;
                }
            }
        }
        let limited = |i: &Item| {
            i.rule
                .as_ref()
                .is_some_and(|r| !r.spec.unlimited && !r.shadow_mode)
        };
        let enforced: Vec<usize> = (0..items.len()).filter(|&i| limited(&items[i])).collect();
        let shadow: Vec<usize> = (0..items.len())
            .filter(|&i| {
                items[i]
                    .rule
                    .as_ref()
                    .is_some_and(|r| !r.spec.unlimited && r.shadow_mode)
            })
            .collect();
        let mut outcomes: Vec<Outcome> = (0..items.len()).map(|_| Outcome::None).collect();
        let allowed = decide_enforced(&items, &enforced, &mut outcomes).await?;
        decide_shadow(&items, &shadow, allowed, &mut outcomes).await;
        Ok(self.respond(&items, &outcomes, allowed))
    }

    /// The counters of a request-specific stat key: kept after the first call.
    fn detailed_counters(&self, key: &str) -> Counters {
        let known = self.detailed.read().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = known.get(key) {
            return c.clone();
        }
        let full = known.len() >= MAX_DETAILED;
        drop(known);
        let c = Counters::new(key);
        if !full {
            let mut map = self.detailed.write().unwrap_or_else(|e| e.into_inner());
            map.entry(key.to_string()).or_insert_with(|| c.clone());
        }
        c
    }

    fn respond(&self, items: &[Item], outcomes: &[Outcome], allowed: bool) -> RateLimitResponse {
        let mut statuses = Vec::with_capacity(items.len());
        let mut names = Vec::with_capacity(items.len());
        for (it, out) in items.iter().zip(outcomes) {
            let Some(rule) = &it.rule else {
                statuses.push(ok_status(None));
                names.push("");
                continue;
            };
            names.push(rule.spec.name.as_deref().unwrap_or(&rule.stat_key));
            if rule.spec.unlimited {
                let mut s = ok_status(None);
                s.limit_remaining = u32::MAX;
                statuses.push(s);
                continue;
            }
            let limit = RateLimit {
                name: rule.spec.name.clone().unwrap_or_default(),
                requests_per_unit: rule.spec.requests_per_unit,
                unit: rule.spec.unit.map_or(0, Unit::proto),
            };
            let period = rule.spec.unit.map_or(0, |u| u.period().as_secs());
            let (denied, remaining, reset) = out.parts(period);
            let counters;
            let c = match &it.detailed {
                Some(k) => {
                    counters = self.detailed_counters(k);
                    &counters
                }
                None => &rule.counters,
            };
            if !matches!(out, Outcome::None) {
                c.record(
                    it.hits,
                    !denied,
                    rule.shadow_mode,
                    limit.requests_per_unit,
                    remaining,
                );
            }
            let code = if denied && !rule.shadow_mode {
                Code::OverLimit
            } else {
                Code::Ok
            };
            statuses.push(DescriptorStatus {
                code: code as i32,
                current_limit: Some(limit),
                limit_remaining: remaining,
                duration_until_reset: Some(reset),
            });
        }
        let overall = if allowed { Code::Ok } else { Code::OverLimit };
        crate::stats::call("decide", if allowed { "ok" } else { "over_limit" });
        RateLimitResponse {
            overall_code: overall as i32,
            response_headers_to_add: headers(self.header_mode, &statuses, &names),
            statuses,
            request_headers_to_add: Vec::new(),
        }
    }
}

/// A status with no limit.
fn ok_status(limit: Option<RateLimit>) -> DescriptorStatus {
    DescriptorStatus {
        code: Code::Ok as i32,
        current_limit: limit,
        limit_remaining: 0,
        duration_until_reset: None,
    }
}

/// The stat key of the request's own entries: `domain.key_value.key_value...`.
fn detailed_key(domain: &str, d: &crate::proto::RateLimitDescriptor) -> String {
    let mut s = domain.to_string();
    for e in &d.entries {
        s.push('.');
        s.push_str(&e.key);
        s.push('_');
        s.push_str(&e.value);
    }
    s
}

/// The limiter of an item that has a rule.
pub fn limiter(it: &Item) -> Option<&Limiter> {
    it.rule.as_ref().map(|r| &*r.limiter)
}
