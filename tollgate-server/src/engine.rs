//! One rate limit decision: a `RateLimitRequest` becomes one limit and key per descriptor,
//! decided (enforced limits all or nothing: a denial takes nothing from the others;
//! quota-mode limits each on its own, denying only when all of them are over), and a
//! `RateLimitResponse`. Shared by the gRPC service and `/json`.

use crate::backend::{Backend, LimitParams};
use crate::budget::{charge_all, give_back_all};
use crate::config::{RateLimitSpec, Unit};
use crate::decide::{
    all_over, decide_counting, decide_each, decide_enforced, look_all, look_unbooked, Item, Outcome,
};
use crate::headers::HeaderMode;
use crate::proto::{RateLimitRequest, RateLimitResponse};
use crate::respond::{respond, DetailedCounters};
use crate::rules::{push_entry, Rule, Rules};
use crate::stats::{Counters, StatKey};
use crate::unknown::UnknownDomains;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};

pub use crate::decide::DecideError;

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

/// How decisions count and deny, beyond each limit's own configuration.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Policy {
    /// envoyproxy/ratelimit's counting (`--count-denied-hits`): every limit of a request is
    /// decided on its own and counts its hits whatever the others say, and a limit that
    /// denies is charged what it had left (upstream's `INCRBY` before deciding). Off: all
    /// or nothing, a denial takes nothing.
    pub count_denied_hits: bool,
    /// Every request is answered `OK`; statuses still say which limits are over
    /// (upstream's `SHADOW_MODE`).
    pub global_shadow: bool,
    /// Every limit is a quota-mode limit (upstream's `QUOTA_MODE`).
    pub global_quota: bool,
}

/// The server's decision state: the compiled configuration (swapped on reload), the
/// backend, and the limits created for descriptors' own `limit` overrides.
#[derive(Debug)]
pub struct Engine {
    rules: RwLock<Arc<Rules>>,
    backend: Backend,
    overrides: Mutex<HashMap<(String, u32, i32), Arc<Rule>>>,
    detailed: DetailedCounters,
    unknown: UnknownDomains,
    header_mode: HeaderMode,
    input: InputLimits,
    policy: Policy,
}

/// Distinct override limits kept at once (beyond, a new one is refused).
const MAX_OVERRIDES: usize = 4_096;

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
            detailed: DetailedCounters::default(),
            unknown: UnknownDomains::default(),
            header_mode,
            input,
            policy: Policy::default(),
        }
    }

    /// This engine deciding under `policy`.
    #[must_use]
    pub fn with_policy(mut self, policy: Policy) -> Self {
        self.policy = policy;
        self
    }

    /// The configuration being served.
    pub fn rules(&self) -> Arc<Rules> {
        Arc::clone(&self.rules.read().unwrap_or_else(|e| e.into_inner()))
    }

    /// Serves `rules` from now on.
    pub fn swap(&self, rules: Rules) {
        *self.rules.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(rules);
        self.unknown.clear();
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
            budget: false,
        };
        let id = format!("override|{domain}|{rpu}|{}", unit.name());
        let stat = StatKey::new(domain).with("override".into());
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
            counters: Counters::new(&stat),
            slot: id.clone(),
            id,
            spec,
            params,
            ring_limit: rpu,
            stat_key: stat.dotted(),
            stat,
            shadow_mode: false,
            quota_mode: false,
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
        if domain.is_none() {
            self.unknown.seen(&req.domain);
        }
        let redis = self.backend.mode() != crate::backend::Mode::Local;
        let base_hits = u64::from(req.hits_addend.max(1));
        let mut items = Vec::with_capacity(req.descriptors.len());
        for d in &req.descriptors {
            let hits = d.hits_addend.unwrap_or(base_hits);
            // An override applies only in a domain the configuration has (as
            // envoyproxy/ratelimit's `GetLimit` looks the domain up first).
            let over = match (&d.limit, domain) {
                (Some(o), Some(dom)) if dom.allow_override => {
                    Unit::from_proto(o.unit).map(|u| (o.requests_per_unit, u))
                }
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
                match domain.map(|dom| (dom, dom.find(&d.entries))) {
                    Some((_, Some(m))) => (Some(Arc::clone(m.rule)), m.key),
                    Some((dom, None)) => {
                        dom.unmatched.increment(1);
                        (None, String::new())
                    }
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
                give_back: d.is_negative_hits,
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
        let g = Groups::of(&items, self.policy.global_quota);
        let mut outcomes: Vec<Outcome> = (0..items.len()).map(|_| Outcome::None).collect();
        // Give-backs first: they return what earlier requests took, whatever this one gets.
        give_back_all(&items, &g.give_backs, &mut outcomes).await?;
        // A budget's check of 0 hits takes nothing and is denied while its key owes: it
        // decides with the other limits before anything is taken.
        charge_all(&items, &g.checks, &mut outcomes).await?;
        let over = |out: &[Outcome], idx: &[usize]| idx.iter().any(|&i| out[i].denied());
        let all_over_now = |out: &[Outcome], idx: &[usize]| {
            !idx.is_empty() && idx.iter().all(|&i| out[i].denied())
        };
        // A request fails on its quota-mode limits only when all of them are over.
        let quota_over = |out: &[Outcome]| {
            let all: Vec<usize> = g.quota.iter().chain(&g.quota_budgets).copied().collect();
            all_over_now(out, &all)
        };
        let counting = self.policy.count_denied_hits;
        let admitted = if counting {
            let enforced_ok = decide_counting(&items, &g.enforced, &mut outcomes).await
                && !over(&outcomes, &g.enforced_checks);
            if !g.quota.is_empty() {
                decide_counting(&items, &g.quota, &mut outcomes).await;
            }
            enforced_ok
        } else if over(&outcomes, &g.enforced_checks) {
            // A budget in debt: denied before anything is counted.
            look_unbooked(&items, &g.enforced, &mut outcomes).await;
            look_unbooked(&items, &g.quota, &mut outcomes).await;
            false
        } else if g.quota.is_empty() && g.quota_checks.is_empty() {
            // The common request: enforced limits only.
            decide_enforced(&items, &g.enforced, &mut outcomes).await?
        } else if (g.quota.is_empty() || all_over(&items, &g.quota))
            && g.quota_checks.iter().all(|&i| outcomes[i].denied())
        {
            // Every quota-mode limit is already over: denied before anything is counted.
            look_all(&items, &g.enforced, &mut outcomes).await;
            look_all(&items, &g.quota, &mut outcomes).await;
            false
        } else if decide_enforced(&items, &g.enforced, &mut outcomes).await? {
            decide_each(&items, &g.quota, true, &mut outcomes).await;
            let before: Vec<usize> = g.quota.iter().chain(&g.quota_checks).copied().collect();
            !all_over_now(&outcomes, &before)
        } else {
            look_all(&items, &g.quota, &mut outcomes).await;
            false
        };
        // Budget charges come after the decision: the cost of work done. Taken when the
        // request was admitted (and always when counting as upstream does); a denied
        // request takes nothing from them either. A charge past what was left is reported
        // `OVER_LIMIT`; it undoes nothing the other limits took.
        if admitted || counting {
            charge_all(&items, &g.charges, &mut outcomes).await?;
        } else {
            // The status says whether the charge would have fit.
            look_unbooked(&items, &g.charges, &mut outcomes).await;
        }
        if !g.shadow.is_empty() {
            decide_each(&items, &g.shadow, admitted || counting, &mut outcomes).await;
        }
        let allowed = admitted && !over(&outcomes, &g.enforced_charges) && !quota_over(&outcomes);
        let allowed = allowed || self.policy.global_shadow;
        Ok(respond(
            &items,
            &outcomes,
            allowed,
            self.header_mode,
            &self.detailed,
        ))
    }
}

/// The limits of one request, sorted by how they are decided (indices into its items).
#[derive(Debug, Default)]
struct Groups {
    /// Enforced limits: all or nothing.
    enforced: Vec<usize>,
    /// Quota-mode limits.
    quota: Vec<usize>,
    /// Shadow-mode limits (budgets too: they never deny).
    shadow: Vec<usize>,
    /// Budget checks (0 hits) of enforced budgets.
    enforced_checks: Vec<usize>,
    /// Budget checks of quota-mode budgets.
    quota_checks: Vec<usize>,
    /// Every budget charge (hits > 0), whatever its mode.
    charges: Vec<usize>,
    /// Budget charges of enforced budgets.
    enforced_charges: Vec<usize>,
    /// Every quota-mode budget, check or charge.
    quota_budgets: Vec<usize>,
    /// Give-backs (`is_negative_hits`), on any limit.
    give_backs: Vec<usize>,
    /// Every budget check, whatever its mode.
    checks: Vec<usize>,
}

impl Groups {
    fn of(items: &[Item], global_quota: bool) -> Groups {
        let mut g = Groups::default();
        for (i, it) in items.iter().enumerate() {
            let Some(r) = &it.rule else { continue };
            if r.spec.unlimited {
                continue;
            }
            if it.give_back {
                g.give_backs.push(i);
                continue;
            }
            let quota = !r.shadow_mode && (r.quota_mode || global_quota);
            let enforced = !r.shadow_mode && !quota;
            if !r.spec.budget {
                match (r.shadow_mode, quota) {
                    (true, _) => g.shadow.push(i),
                    (false, true) => g.quota.push(i),
                    (false, false) => g.enforced.push(i),
                }
                continue;
            }
            if quota {
                g.quota_budgets.push(i);
            }
            if it.hits == 0 {
                g.checks.push(i);
                if enforced {
                    g.enforced_checks.push(i);
                } else if quota {
                    g.quota_checks.push(i);
                }
            } else {
                g.charges.push(i);
                if enforced {
                    g.enforced_charges.push(i);
                }
            }
        }
        g
    }
}

/// The stat key of the request's own entries: `domain.key_value.key_value...`.
fn detailed_key(domain: &str, d: &crate::proto::RateLimitDescriptor) -> StatKey {
    let mut k = StatKey::new(domain);
    for e in &d.entries {
        k.levels.push(format!("{}_{}", e.key, e.value));
    }
    k
}
