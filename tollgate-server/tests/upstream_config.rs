//! envoyproxy/ratelimit's `test/config/config_test.go` (at f2fb157), ported: its files
//! (`testdata/upstream/test-config/`, copied unchanged) loaded through tollgate-server,
//! its lookups made through the protocol, its refused files refused.

mod common;

use common::{desc, request, TempDir};
use std::path::{Path, PathBuf};
use tollgate_server::backend::{Backend, BackendConfig};
use tollgate_server::engine::{Engine, InputLimits};
use tollgate_server::headers::HeaderMode;
use tollgate_server::proto::RateLimit;
use tollgate_server::rules::Rules;

fn upstream(file: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("testdata/upstream/test-config")
        .join(file)
}

/// An engine serving upstream's `files`, copied into a directory of their own.
async fn serve(files: &[&str]) -> Result<(TempDir, Engine), String> {
    serve_merging(files, false).await
}

/// [`serve`], merging the files of one domain when `merge`; a file named twice is copied
/// under a second name.
async fn serve_merging(files: &[&str], merge: bool) -> Result<(TempDir, Engine), String> {
    let dir = TempDir::new("upstream");
    for (i, f) in files.iter().enumerate() {
        let name = if files[..i].contains(f) {
            format!("{i}-{f}")
        } else {
            (*f).to_string()
        };
        dir.write(&name, &std::fs::read_to_string(upstream(f)).unwrap());
    }
    let backend = Backend::new(BackendConfig::default()).await?;
    let e = Engine::new(
        Rules::default(),
        backend,
        HeaderMode::Off,
        InputLimits::default(),
    );
    tollgate_server::reload::reload_merging(&e, &dir.0, merge).await?;
    Ok((dir, e))
}

/// The limit upstream's `GetLimit` would return for `entries` (`None`: no limit).
async fn limit(e: &Engine, domain: &str, entries: &[(&str, &str)]) -> Option<RateLimit> {
    let r = e
        .decide(&request(domain, vec![desc(entries)]))
        .await
        .expect("decided");
    r.statuses[0].current_limit.clone()
}

const SECOND: i32 = 1;
const MINUTE: i32 = 2;
const HOUR: i32 = 3;
const DAY: i32 = 4;

/// `TestBasicConfig`.
#[tokio::test]
async fn basic_config_lookups() {
    let (_dir, e) = serve(&["basic_config.yaml"]).await.unwrap();
    let td = "test-domain";
    let rpu_unit = |l: Option<RateLimit>| l.map(|l| (l.requests_per_unit, l.unit));
    assert_eq!(limit(&e, "foo_domain", &[("key1", "value1")]).await, None);
    for none in [
        &[("key1", "something")][..],
        &[("key1", "value1")],
        &[("key2", "value2"), ("subkey", "subvalue")],
        &[("key5", "value5"), ("subkey5", "subvalue")],
        &[("key2", "value3")],
    ] {
        assert_eq!(limit(&e, td, none).await, None, "{none:?}");
    }
    for (entries, want) in [
        (
            &[("key1", "value1"), ("subkey1", "something")][..],
            (5, SECOND),
        ),
        (
            &[("key1", "value1"), ("subkey1", "subvalue1")],
            (10, SECOND),
        ),
        (&[("key2", "something")], (20, MINUTE)),
        (&[("key2", "value2")], (30, MINUTE)),
        (&[("key3", "foo")], (1, HOUR)),
        (&[("key7", "unspecified_value")], (70, MINUTE)),
        (&[("key7", "another_value")], (70, MINUTE)),
    ] {
        assert_eq!(
            rpu_unit(limit(&e, td, entries).await),
            Some(want),
            "{entries:?}"
        );
    }
    let key3 = limit(&e, td, &[("key3", "foo")]).await.unwrap();
    assert_eq!(key3.name, "", "no name provided in config");
    let key4 = limit(&e, td, &[("key4", "foo")]).await.unwrap();
    assert_eq!(
        (key4.requests_per_unit, key4.unit, key4.name.as_str()),
        (1, DAY, "key4_rate_limit")
    );
    // key6 is unlimited: OK with the largest remaining count, no limit.
    let r = e
        .decide(&request(td, vec![desc(&[("key6", "foo")])]))
        .await
        .unwrap();
    assert_eq!(r.statuses[0].limit_remaining, u32::MAX);
    assert_eq!(r.statuses[0].current_limit, None);
}

/// The files upstream loads: they load here too.
#[tokio::test]
async fn upstreams_good_files_load() {
    for f in [
        "basic_config.yaml",
        "metadata.yaml",
        "shadowmode_config.yaml",
        "share_threshold.yaml",
        "wildcard.yaml",
        "merge_domain_key1.yaml",
        "merge_domain_key2.yaml",
    ] {
        serve(&[f]).await.unwrap_or_else(|e| panic!("{f}: {e}"));
    }
}

/// `TestEmptyDomain`, `TestDuplicateDomain`, `TestEmptyKey`, `TestDuplicateKey`,
/// `TestBadLimitUnit`, `TestReplacesSelf`, `TestReplacesEmpty`, `TestBadYaml`,
/// `TestMisspelledKey`, `TestNonStringKey`, `TestNonMapList`,
/// `TestUnlimitedWithRateLimitUnit`: each refused, naming the file, with the part of
/// upstream's reason that says what is wrong.
#[tokio::test]
async fn upstreams_bad_files_are_refused() {
    for (files, file, says) in [
        (&["empty_domain.yaml"][..], "empty_domain.yaml", "domain"),
        (
            &["basic_config.yaml", "duplicate_domain.yaml"],
            "duplicate_domain.yaml",
            "already defined",
        ),
        (&["empty_key.yaml"], "empty_key.yaml", "key"),
        (&["duplicate_key.yaml"], "duplicate_key.yaml", "duplicate"),
        (
            &["bad_limit_unit.yaml"],
            "bad_limit_unit.yaml",
            "unit `foo`",
        ),
        (
            &["replaces_self.yaml"],
            "replaces_self.yaml",
            "replaces should not contain name of same descriptor",
        ),
        (
            &["replaces_empty.yaml"],
            "replaces_empty.yaml",
            "should not have an empty replaces entry",
        ),
        (&["bad_yaml.yaml"], "bad_yaml.yaml", ""),
        (&["misspelled_key.yaml"], "misspelled_key.yaml", "ratelimit"),
        (
            &["misspelled_key2.yaml"],
            "misspelled_key2.yaml",
            "requestsperunit",
        ),
        (&["non_string_key.yaml"], "non_string_key.yaml", "0.25"),
        (&["non_map_list.yaml"], "non_map_list.yaml", ""),
        (
            &["unlimited_with_unit.yaml"],
            "unlimited_with_unit.yaml",
            "should not specify rate limit unit when unlimited",
        ),
    ] {
        let err = match serve(files).await {
            Ok(_) => panic!("{file} was served"),
            Err(e) => e,
        };
        assert!(err.contains(file), "{file}: {err}");
        assert!(err.contains(says), "{file}: {err}");
    }
}

/// `TestShadowModeConfig`: the shadow-mode limits are found, and never deny.
#[tokio::test]
async fn shadow_mode_config() {
    let (_dir, e) = serve(&["shadowmode_config.yaml"]).await.unwrap();
    for _ in 0..20 {
        let r = e
            .decide(&request(
                "test-domain",
                vec![desc(&[("key1", "value1"), ("subkey1", "subvalue1")])],
            ))
            .await
            .unwrap();
        assert_eq!(r.overall_code, 1, "{r:?}");
        assert!(r.statuses[0].current_limit.is_some());
    }
}

/// `TestDomainMerge`: with `MERGE_DOMAIN_CONFIG`, two files of one domain are one domain.
#[tokio::test]
async fn domain_merge() {
    let files = ["merge_domain_key1.yaml", "merge_domain_key2.yaml"];
    let (_dir, e) = serve_merging(&files, true).await.unwrap();
    let rpu = |l: Option<RateLimit>| l.map(|l| l.requests_per_unit);
    assert_eq!(limit(&e, "foo_domain", &[("key1", "value1")]).await, None);
    assert_eq!(
        rpu(limit(&e, "test-domain", &[("key1", "value1")]).await),
        Some(10)
    );
    assert_eq!(
        rpu(limit(&e, "test-domain", &[("key2", "value2")]).await),
        Some(20)
    );
    // Without the setting, the second file of the domain is refused.
    let err = serve(&files).await.err().expect("refused");
    assert!(err.contains("already defined"), "{err}");
}

/// `TestDuplicateKeyDomainMerge`: a key and value in two merged files is refused.
#[tokio::test]
async fn duplicate_key_domain_merge() {
    let files = ["merge_domain_key1.yaml", "merge_domain_key1.yaml"];
    let err = serve_merging(&files, true).await.err().expect("refused");
    assert!(
        err.contains("duplicate descriptor composite key `test-domain.key1_value1`"),
        "{err}"
    );
}
