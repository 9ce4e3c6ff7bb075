//! The configuration compiled for matching: one tree of descriptor nodes per domain, with
//! envoyproxy/ratelimit's rules (at each level: the exact value, then the first wildcard
//! value ending in `*` whose prefix matches, then the key with no value, one limit per
//! distinct value), and one limiter per configured limit.
//!
//! A limit keeps its limiter (and so its counts) across reloads while its identity (domain,
//! path in the tree, and every field of its `rate_limit`) is unchanged.

use crate::backend::{Backend, LimitParams, Limiter};
use crate::config::{Config, Descriptor, RateLimitSpec};
use crate::proto::Entry;
use crate::stats::Counters;
use std::collections::HashMap;
use std::sync::Arc;

/// Keys a limit's table holds when neither the limit nor its domain says.
pub const DEFAULT_MAX_KEYS: usize = 65_536;

/// One configured limit, ready to decide.
#[derive(Debug)]
pub struct Rule {
    /// Identity across reloads: domain, path and the spec.
    pub id: String,
    /// The configured limit.
    pub spec: RateLimitSpec,
    /// envoyproxy/ratelimit's stat key: `domain.key_value.key...`.
    pub stat_key: String,
    /// Never denies.
    pub shadow_mode: bool,
    /// Metrics per request value.
    pub detailed_metric: bool,
    /// The counts.
    pub limiter: Arc<Limiter>,
    /// Metric handles for `stat_key`.
    pub counters: Counters,
}

/// The children of one node under one entry key.
#[derive(Debug, Default)]
struct KeyChildren {
    exact: HashMap<String, Node>,
    /// `(prefix without the '*', share_threshold, node)`, in file order.
    wildcards: Vec<(String, bool, Node)>,
    any: Option<Box<Node>>,
}

/// A node of the tree.
#[derive(Debug, Default)]
pub struct Node {
    rule: Option<Arc<Rule>>,
    children: HashMap<String, KeyChildren>,
}

/// A domain's compiled tree.
#[derive(Debug)]
pub struct Domain {
    /// The domain's name.
    pub name: String,
    /// Whether a descriptor's own `limit` replaces the configured one.
    pub allow_override: bool,
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
            } else if let Some((prefix, shared, n)) = kids
                .wildcards
                .iter()
                .find(|(p, _, _)| e.value.starts_with(p.as_str()))
            {
                (
                    n,
                    if *shared {
                        prefix.as_str()
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
    pub domains: HashMap<String, Domain>,
}

impl Rules {
    /// Every limit, by identity.
    pub fn by_id(&self) -> HashMap<String, Arc<Rule>> {
        fn walk(n: &Node, out: &mut HashMap<String, Arc<Rule>>) {
            if let Some(r) = &n.rule {
                out.insert(r.id.clone(), Arc::clone(r));
            }
            for kids in n.children.values() {
                kids.exact.values().for_each(|c| walk(c, out));
                kids.wildcards.iter().for_each(|(_, _, c)| walk(c, out));
                if let Some(c) = &kids.any {
                    walk(c, out);
                }
            }
        }
        let mut out = HashMap::new();
        for d in self.domains.values() {
            walk(&d.root, &mut out);
        }
        out
    }

    /// Compiles `config`, reusing the limiter of every limit of `previous` whose identity
    /// is unchanged (its counts carry over).
    ///
    /// # Errors
    ///
    /// A limiter the backend cannot build, with the file and descriptor path.
    pub async fn compile(
        config: &Config,
        backend: &Backend,
        previous: &HashMap<String, Arc<Rule>>,
    ) -> Result<Rules, String> {
        let mut domains = HashMap::new();
        for (name, (file, df)) in &config.domains {
            let mut ctx = Ctx {
                domain: name,
                max_keys: df.max_keys.unwrap_or(DEFAULT_MAX_KEYS),
                backend,
                previous,
            };
            let mut root = Node::default();
            for (i, d) in df.descriptors.0.iter().enumerate() {
                let path = format!("descriptors[{i}]");
                ctx.insert(&mut root, d, name.clone(), String::new(), &path)
                    .await
                    .map_err(|e| format!("{}: {e}", file.display()))?;
            }
            domains.insert(
                name.clone(),
                Domain {
                    name: name.clone(),
                    allow_override: df.allow_limit_override.unwrap_or(true),
                    root,
                },
            );
        }
        Ok(Rules { domains })
    }
}

struct Ctx<'a> {
    domain: &'a str,
    max_keys: usize,
    backend: &'a Backend,
    previous: &'a HashMap<String, Arc<Rule>>,
}

impl Ctx<'_> {
    /// Adds `d` (and its subtree) under `parent`.
    fn insert<'s>(
        &'s mut self,
        parent: &'s mut Node,
        d: &'s Descriptor,
        stat_key: String,
        id_path: String,
        field: &'s str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), String>> + Send + 's>> {
        Box::pin(async move {
            let mut node = Node::default();
            let stat_key = match &d.value {
                Some(v) => format!("{stat_key}.{}_{v}", d.key),
                None => format!("{stat_key}.{}", d.key),
            };
            let mut id_path = id_path;
            push_entry(&mut id_path, &d.key, d.value.as_deref().unwrap_or("\u{0}"));
            if let Some(spec) = &d.rate_limit {
                let id = format!(
                    "{}|{id_path}|{spec:?}|shadow={}|detailed={}|share={}",
                    self.domain, d.shadow_mode, d.detailed_metric, d.share_threshold
                );
                let limiter = match self.previous.get(&id) {
                    Some(old) => Arc::clone(&old.limiter),
                    None => {
                        let params = LimitParams {
                            algorithm: spec.algorithm.algorithm(),
                            quota: spec.quota(),
                            max_keys: spec.max_keys.unwrap_or(self.max_keys),
                            on_full: spec.on_full.on_full(),
                        };
                        self.backend
                            .limiter(&id, params)
                            .await
                            .map_err(|e| format!("{field}.rate_limit: {e}"))?
                    }
                };
                node.rule = Some(Arc::new(Rule {
                    counters: Counters::new(&stat_key),
                    id,
                    spec: spec.clone(),
                    stat_key: stat_key.clone(),
                    shadow_mode: d.shadow_mode,
                    detailed_metric: d.detailed_metric,
                    limiter,
                }));
            }
            for (i, child) in d.descriptors.0.iter().enumerate() {
                let f = format!("{field}.descriptors[{i}]");
                self.insert(&mut node, child, stat_key.clone(), id_path.clone(), &f)
                    .await?;
            }
            let kids = parent.children.entry(d.key.clone()).or_default();
            match &d.value {
                Some(v) if v.ends_with('*') => {
                    let prefix = v.strip_suffix('*').unwrap_or(v).to_string();
                    kids.wildcards.push((prefix, d.share_threshold, node));
                }
                Some(v) => {
                    kids.exact.insert(v.clone(), node);
                }
                None => kids.any = Some(Box::new(node)),
            }
            Ok(())
        })
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
        Rules::compile(&config, &backend, previous).await.unwrap()
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
    async fn recompiling_keeps_unchanged_limiters_only() {
        let first = compile(YAML, &HashMap::new()).await;
        let changed = YAML.replace("requests_per_unit: 3", "requests_per_unit: 30");
        let second = compile(&changed, &first.by_id()).await;
        let limiter = |r: &Rules, pairs: &[(&str, &str)]| {
            Arc::clone(&r.domains["d"].find(&entries(pairs)).unwrap().rule.limiter)
        };
        assert!(Arc::ptr_eq(
            &limiter(&first, &[("k", "exact")]),
            &limiter(&second, &[("k", "exact")])
        ));
        assert!(!Arc::ptr_eq(
            &limiter(&first, &[("k", "zz")]),
            &limiter(&second, &[("k", "zz")])
        ));
    }
}
