//! Compiling a configuration into [`Rules`]: the tree of each domain, and a limiter for
//! each limit, kept, retuned or new according to [`carry::plan`].

use super::carry::{self, Carry};
use super::pattern::Pattern;
use super::{push_entry, Domain, Node, Rule, Rules, DEFAULT_MAX_KEYS};
use crate::backend::{Backend, LimitParams, Limiter};
use crate::config::{Config, Descriptor};
use crate::stats::{Counters, StatKey};
use std::collections::HashMap;
use std::sync::Arc;
use tollgate::Quota;

/// A quota to give a kept limiter when the new configuration is committed.
#[derive(Debug)]
pub struct Retune {
    /// The limit's stat key (for the log).
    pub name: String,
    /// The limiter, shared by the old and the new configuration.
    pub limiter: Arc<Limiter>,
    /// Its new quota.
    pub quota: Quota,
}

/// A compiled configuration not yet serving: [`Compiled::commit`] retunes the kept
/// limiters and hands over the rules.
#[derive(Debug, Default)]
pub struct Compiled {
    /// The rules.
    pub rules: Rules,
    /// Kept limiters that take a new quota at commit.
    pub retunes: Vec<Retune>,
    /// Limits whose limiter is kept unchanged.
    pub kept: usize,
    /// Limits that are new, or changed in a way their counts could not follow.
    pub fresh: usize,
    /// For each changed limit whose counts could not follow: its stat key and why.
    pub lost: Vec<(String, String)>,
}

impl Compiled {
    /// Gives each retuned limiter its new quota and returns the rules to serve. A quota
    /// the engine refuses (which [`carry::plan`] rules out beforehand) is logged, and that
    /// limiter keeps deciding with its previous quota.
    pub fn commit(self) -> Rules {
        for r in &self.retunes {
            if let Err(e) = r.limiter.set_quota(r.quota) {
                tracing::error!(limit = %r.name, error = %e, "the new quota was refused; the limit keeps its previous quota");
            }
        }
        for (name, why) in &self.lost {
            tracing::warn!(limit = %name, reason = %why, "limit changed: what its keys used could not be carried over");
        }
        self.rules
    }
}

impl Rules {
    /// Compiles `config`. Each limit at a place `previous` (by [`Rule::slot`]) also has
    /// keeps or retunes that limiter as [`carry::plan`] says; nothing of `previous` changes
    /// until [`Compiled::commit`].
    ///
    /// # Errors
    ///
    /// A limiter the backend cannot build, with the file and descriptor path.
    pub async fn compile(
        config: &Config,
        backend: &Backend,
        previous: &HashMap<String, Arc<Rule>>,
    ) -> Result<Compiled, String> {
        let mut out = Compiled::default();
        for (name, (file, df)) in &config.domains {
            let mut ctx = Ctx {
                domain: name,
                max_keys: df.max_keys.unwrap_or(DEFAULT_MAX_KEYS),
                backend,
                previous,
                out: &mut out,
            };
            let mut root = Node::default();
            for (i, d) in df.descriptors.0.iter().enumerate() {
                let path = format!("descriptors[{i}]");
                ctx.insert(&mut root, d, StatKey::new(name), String::new(), &path)
                    .await
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
            out.rules.domains.insert(
                name.clone(),
                Domain {
                    name: name.clone(),
                    allow_override: df.allow_limit_override.unwrap_or(true),
                    unmatched: crate::unknown::unmatched_counter(name),
                    root,
                },
            );
        }
        Ok(out)
    }
}

struct Ctx<'a> {
    domain: &'a str,
    max_keys: usize,
    backend: &'a Backend,
    previous: &'a HashMap<String, Arc<Rule>>,
    out: &'a mut Compiled,
}

impl Ctx<'_> {
    /// The limiter of the limit at `slot`, and the ring size it was built with.
    async fn limiter(
        &mut self,
        slot: &str,
        stat_key: &str,
        params: LimitParams,
        field: &str,
    ) -> Result<(Arc<Limiter>, u32), String> {
        if let Some(old) = self.previous.get(slot) {
            match carry::plan(old, &params, self.backend.mode()) {
                Carry::Keep(l) => {
                    self.out.kept += 1;
                    return Ok((l, old.ring_limit));
                }
                Carry::Retune(limiter, quota) => {
                    self.out.retunes.push(Retune {
                        name: stat_key.to_string(),
                        limiter: Arc::clone(&limiter),
                        quota,
                    });
                    return Ok((limiter, old.ring_limit));
                }
                Carry::Fresh { lost } => {
                    if let Some(why) = lost {
                        self.out.lost.push((stat_key.to_string(), why));
                    }
                }
            }
        }
        self.out.fresh += 1;
        // Redis keys are named by the place and the algorithm, not the quota: counts
        // written under one quota are read under the next (as envoyproxy/ratelimit's keys
        // hold no limit value), and instances with one configuration share them.
        let redis_id = format!("{slot}|{:?}", params.algorithm);
        let limiter = self
            .backend
            .limiter(&redis_id, params)
            .await
            .map_err(|e| format!("{field}.rate_limit: {e}"))?;
        Ok((limiter, params.quota.map_or(0, |q| q.limit())))
    }

    /// Adds `d` (and its subtree) under `parent`.
    fn insert<'s>(
        &'s mut self,
        parent: &'s mut Node,
        d: &'s Descriptor,
        stat: StatKey,
        slot_path: String,
        field: &'s str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 's>> {
        Box::pin(async move {
            let mut node = Node::default();
            let stat = stat.with(match &d.value {
                Some(v) => format!("{}_{v}", d.key),
                None => d.key.clone(),
            });
            let mut slot_path = slot_path;
            push_entry(
                &mut slot_path,
                &d.key,
                d.value.as_deref().unwrap_or("\u{0}"),
            );
            if let Some(spec) = &d.rate_limit {
                let slot = format!("{}|{slot_path}", self.domain);
                let stat_key = stat.dotted();
                let params = LimitParams {
                    algorithm: spec.algorithm.algorithm(),
                    quota: spec.quota(),
                    max_keys: spec.max_keys.unwrap_or(self.max_keys),
                    on_full: spec.on_full.on_full(),
                };
                let (limiter, ring_limit) = self.limiter(&slot, &stat_key, params, field).await?;
                node.rule = Some(Arc::new(Rule {
                    counters: Counters::new(&stat),
                    id: format!(
                        "{slot}|{spec:?}|shadow={}|quota={}|detailed={}|share={}",
                        d.shadow_mode, d.quota_mode, d.detailed_metric, d.share_threshold
                    ),
                    slot,
                    spec: spec.clone(),
                    params,
                    ring_limit,
                    stat_key,
                    stat: stat.clone(),
                    shadow_mode: d.shadow_mode,
                    quota_mode: d.quota_mode,
                    detailed_metric: d.detailed_metric,
                    limiter,
                }));
            }
            for (i, child) in d.descriptors.0.iter().enumerate() {
                let f = format!("{field}.descriptors[{i}]");
                self.insert(&mut node, child, stat.clone(), slot_path.clone(), &f)
                    .await?;
            }
            let kids = parent.children.entry(d.key.clone()).or_default();
            match d.value.as_deref().map(|v| (v, Pattern::new(v))) {
                Some((_, Some(p))) => kids.wildcards.push((p, d.share_threshold, node)),
                Some((v, None)) => {
                    kids.exact.insert(v.to_string(), node);
                }
                None => kids.any = Some(Box::new(node)),
            }
            Ok(())
        })
    }
}
