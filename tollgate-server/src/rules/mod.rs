//! The configuration compiled for matching: one tree of descriptor nodes per domain, with
//! envoyproxy/ratelimit's rules (at each level: the exact value, then the first wildcard
//! value (a `*` anywhere, [`pattern`]) that matches, in file order, then the key with no
//! value, one limit per distinct value), and one limiter per configured limit.
//!
//! A limit keeps its limiter across reloads while it sits at the same place (domain and
//! path in the tree); what its keys used follows a change of its quota ([`carry`]).

pub mod carry;
mod compile;
pub mod hasher;
pub mod pattern;

pub use compile::{Compiled, Retune};

use crate::backend::{LimitParams, Limiter};
use crate::config::RateLimitSpec;
use crate::proto::Entry;
use crate::stats::{Counters, StatKey};
use hasher::ConfigMap;
use pattern::Pattern;
use std::collections::HashMap;
use std::sync::Arc;

/// Keys a limit's table holds when neither the limit nor its domain says.
pub const DEFAULT_MAX_KEYS: usize = 65_536;

/// One configured limit, ready to decide.
#[derive(Debug)]
pub struct Rule {
    /// Where the limit sits: domain and path in the tree. "The same limit" across reloads.
    pub slot: String,
    /// The whole identity: the place, the spec and the flags (unchanged: nothing to do).
    pub id: String,
    /// The configured limit.
    pub spec: RateLimitSpec,
    /// What the limiter was built from (the quota after any retune).
    pub params: LimitParams,
    /// A sliding log's ring size: the limit its limiter was first built with.
    pub ring_limit: u32,
    /// envoyproxy/ratelimit's stat key, `domain.key_value.key...`, as a name.
    pub stat_key: String,
    /// The stat key's parts (the metric labels).
    pub stat: StatKey,
    /// Never denies.
    pub shadow_mode: bool,
    /// Denies a request only when every quota-mode limit of the request is over.
    pub quota_mode: bool,
    /// Metrics per request value.
    pub detailed_metric: bool,
    /// The counts.
    pub limiter: Arc<Limiter>,
    /// Metric handles for `stat`.
    pub counters: Counters,
}

/// The children of one node under one entry key.
#[derive(Debug, Default)]
struct KeyChildren {
    exact: ConfigMap<Node>,
    /// `(pattern, share_threshold, node)`, in file order.
    wildcards: Vec<(Pattern, bool, Node)>,
    any: Option<Box<Node>>,
}

/// A node of the tree.
#[derive(Debug, Default)]
pub struct Node {
    rule: Option<Arc<Rule>>,
    children: ConfigMap<KeyChildren>,
}

/// A domain's compiled tree.
#[derive(Debug)]
pub struct Domain {
    /// The domain's name.
    pub name: String,
    /// Whether a descriptor's own `limit` replaces the configured one.
    pub allow_override: bool,
    /// Counts the descriptors of this domain that matched no limit.
    pub unmatched: metrics::Counter,
    root: Node,
}

/// The matched limit for one descriptor and the key its counts are kept under.
#[derive(Debug)]
pub struct Match<'a> {
    /// The limit.
    pub rule: &'a Arc<Rule>,
    /// The key: every entry's key and value (the wildcard pattern for a shared one).
    pub key: String,
}

/// Appends one entry to a counting key (length-prefixed: no two entry lists collide).
pub fn push_entry(key: &mut String, k: &str, v: &str) {
    // `{k.len()}:{k}{v.len()}:{v};`, built without the formatter (every call builds one).
    let len = |s: &str| i64::try_from(s.len()).unwrap_or(i64::MAX);
    crate::digits::push_int(key, len(k));
    key.push(':');
    key.push_str(k);
    crate::digits::push_int(key, len(v));
    key.push(':');
    key.push_str(v);
    key.push(';');
}

impl Domain {
    /// The limit for `entries`: the node reached by the whole list, when it has one.
    pub fn find(&self, entries: &[Entry]) -> Option<Match<'_>> {
        let mut node = &self.root;
        let mut key = String::with_capacity(64);
        for (i, e) in entries.iter().enumerate() {
            let kids = node.children.get(&e.key)?;
            let (next, value) = if let Some(n) = kids.exact.get(&e.value) {
                (n, e.value.as_str())
            } else if let Some((pattern, shared, n)) =
                kids.wildcards.iter().find(|(p, _, _)| p.matches(&e.value))
            {
                (
                    n,
                    if *shared {
                        pattern.text()
                    } else {
                        e.value.as_str()
                    },
                )
            } else {
                (kids.any.as_deref()?, e.value.as_str())
            };
            push_entry(&mut key, &e.key, value);
            if i + 1 == entries.len() {
                return next.rule.as_ref().map(|rule| Match { rule, key });
            }
            if next.children.is_empty() {
                return None;
            }
            node = next;
        }
        None
    }
}

/// The compiled configuration.
#[derive(Debug, Default)]
pub struct Rules {
    /// Domains by name.
    pub domains: ConfigMap<Domain>,
}

impl Rules {
    /// Every limit, by place ([`Rule::slot`]).
    pub fn by_slot(&self) -> HashMap<String, Arc<Rule>> {
        let mut out = HashMap::new();
        self.each(|r| {
            out.insert(r.slot.clone(), Arc::clone(r));
        });
        out
    }

    /// The loaded limits, one line each, sorted, in envoyproxy/ratelimit's `/rlconfig`
    /// format (`domain.key_value.key: unit=MINUTE requests_per_unit=5, shadow_mode: false,
    /// quota_mode: false`), with tollgate's algorithm appended when it is not the default,
    /// and `budget: true` for a budget.
    pub fn dump(&self) -> String {
        let mut lines = Vec::new();
        self.each(|r| {
            let unit = r.spec.unit.map_or("UNKNOWN", crate::config::Unit::name);
            let mut line = format!(
                "{}: unit={unit} requests_per_unit={}, shadow_mode: {}, quota_mode: {}",
                r.stat_key, r.spec.requests_per_unit, r.shadow_mode, r.quota_mode
            );
            if r.params.algorithm != tollgate::Algorithm::FixedWindow {
                line.push_str(&format!(", algorithm: {:?}", r.params.algorithm));
            }
            if r.spec.budget {
                line.push_str(", budget: true");
            }
            lines.push(line);
        });
        lines.sort();
        let mut out = lines.join("\n");
        if !out.is_empty() {
            out.push('\n');
        }
        out
    }

    /// Calls `f` on every limit.
    pub fn each(&self, mut f: impl FnMut(&Arc<Rule>)) {
        fn walk(n: &Node, f: &mut dyn FnMut(&Arc<Rule>)) {
            if let Some(r) = &n.rule {
                f(r);
            }
            for kids in n.children.values() {
                kids.exact.values().for_each(|c| walk(c, f));
                kids.wildcards.iter().for_each(|(_, _, c)| walk(c, f));
                if let Some(c) = &kids.any {
                    walk(c, f);
                }
            }
        }
        for d in self.domains.values() {
            walk(&d.root, &mut f);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Backend, BackendConfig};
    use crate::config::{parse_file, Config};
    use std::path::Path;

    const YAML: &str = "domain: d
descriptors:
  - key: k
    value: exact
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: ex*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: s
    value: p*
    share_threshold: true
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: a
    descriptors:
      - key: b
        value: c
        rate_limit: {unit: second, requests_per_unit: 5}
";

    async fn compile(text: &str, previous: &HashMap<String, Arc<Rule>>) -> Rules {
        let df = parse_file(Path::new("d.yaml"), text).unwrap();
        let mut config = Config::default();
        config
            .domains
            .insert(df.domain.clone(), ("d.yaml".into(), df));
        let backend = Backend::new(BackendConfig::default()).await.unwrap();
        Rules::compile(&config, &backend, previous)
            .await
            .unwrap()
            .commit()
    }

    fn entries(pairs: &[(&str, &str)]) -> Vec<Entry> {
        pairs
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect()
    }

    fn rpu(rules: &Rules, pairs: &[(&str, &str)]) -> Option<u32> {
        rules.domains["d"]
            .find(&entries(pairs))
            .map(|m| m.rule.spec.requests_per_unit)
    }

    #[tokio::test]
    async fn exact_then_wildcard_then_any_value() {
        let r = compile(YAML, &HashMap::new()).await;
        assert_eq!(rpu(&r, &[("k", "exact")]), Some(1));
        assert_eq!(rpu(&r, &[("k", "exactly")]), Some(2));
        assert_eq!(rpu(&r, &[("k", "other")]), Some(3));
        assert_eq!(rpu(&r, &[("a", "x"), ("b", "c")]), Some(5));
        assert_eq!(rpu(&r, &[("a", "x")]), None);
        assert_eq!(rpu(&r, &[("a", "x"), ("b", "d")]), None);
        assert_eq!(rpu(&r, &[("a", "x"), ("b", "c"), ("e", "f")]), None);
        assert_eq!(rpu(&r, &[("zz", "x")]), None);
    }

    #[tokio::test]
    async fn keys_are_per_value_except_shared_wildcards() {
        let r = compile(YAML, &HashMap::new()).await;
        let key = |pairs: &[(&str, &str)]| r.domains["d"].find(&entries(pairs)).unwrap().key;
        assert_ne!(key(&[("k", "x")]), key(&[("k", "y")]));
        assert_ne!(key(&[("k", "exa")]), key(&[("k", "exb")]));
        assert_eq!(key(&[("s", "p1")]), key(&[("s", "p2")]));
        // Length-prefixed entries: ("a:b", "") and ("a", ":b") differ.
        let mut x = String::new();
        push_entry(&mut x, "a:b", "");
        let mut y = String::new();
        push_entry(&mut y, "a", ":b");
        assert_ne!(x, y);
    }

    #[tokio::test]
    async fn recompiling_keeps_each_limiter_and_retunes_a_changed_quota() {
        let first = compile(YAML, &HashMap::new()).await;
        let changed = YAML.replace("requests_per_unit: 3", "requests_per_unit: 30");
        let second = compile(&changed, &first.by_slot()).await;
        let limiter = |r: &Rules, pairs: &[(&str, &str)]| {
            Arc::clone(&r.domains["d"].find(&entries(pairs)).unwrap().rule.limiter)
        };
        assert!(Arc::ptr_eq(
            &limiter(&first, &[("k", "exact")]),
            &limiter(&second, &[("k", "exact")])
        ));
        let (a, b) = (
            limiter(&first, &[("k", "zz")]),
            limiter(&second, &[("k", "zz")]),
        );
        assert!(Arc::ptr_eq(&a, &b), "a changed quota keeps its limiter");
        let crate::backend::Limiter::Local(k) = &*b else {
            panic!("local")
        };
        assert_eq!(k.quota().limit(), 30);
        // Another algorithm: a new limiter.
        let other = YAML.replace(
            "requests_per_unit: 3}",
            "requests_per_unit: 3, algorithm: token_bucket}",
        );
        let third = compile(&other, &first.by_slot()).await;
        assert!(!Arc::ptr_eq(&a, &limiter(&third, &[("k", "zz")])));
    }

    #[tokio::test]
    async fn wildcards_anywhere_in_a_value() {
        let text = "domain: d
descriptors:
  - key: mid
    value: bar*b
    rate_limit: {unit: minute, requests_per_unit: 20}
  - key: multi
    value: foo*bar*baz
    rate_limit: {unit: minute, requests_per_unit: 10}
";
        let r = compile(text, &HashMap::new()).await;
        assert_eq!(rpu(&r, &[("mid", "bar-x-b")]), Some(20));
        assert_eq!(rpu(&r, &[("mid", "barb")]), Some(20));
        assert_eq!(rpu(&r, &[("mid", "bar-x-c")]), None);
        assert_eq!(rpu(&r, &[("multi", "foo1bar2baz")]), Some(10));
        assert_eq!(rpu(&r, &[("multi", "foo1baz2bar")]), None);
    }
}
