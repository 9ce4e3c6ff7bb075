//! Loading the configuration directory, and reloading it when a file changes (polled) or
//! on SIGHUP. A limit at the same place keeps its limiter, and what its keys used follows a
//! change of its quota (`rules::carry`); a directory that cannot be used is refused, logged
//! with its file, line and field, and the previous configuration keeps serving.

use crate::config::load_dir_merging;
use crate::engine::Engine;
use crate::rules::Rules;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// What identifies the directory's content without reading it: each YAML file's name,
/// modification time and length.
pub fn fingerprint(dir: &Path) -> Fingerprint {
    crate::config::config_files(dir)
        .unwrap_or_default()
        .into_iter()
        .map(|p| {
            let m = std::fs::metadata(&p).ok();
            let modified = m.as_ref().and_then(|m| m.modified().ok());
            let len = m.map_or(0, |m| m.len());
            (p, modified, len)
        })
        .collect()
}

/// Loads `dir` and serves it, keeping the limiters of unchanged limits. Returns the
/// number of limits served.
///
/// # Errors
///
/// The refusal (file, line, field, message); the engine is left as it was.
pub async fn reload(engine: &Engine, dir: &Path) -> Result<usize, String> {
    reload_merging(engine, dir, false).await
}

/// [`reload`], merging the files of one domain when `merge` (envoyproxy/ratelimit's
/// `MERGE_DOMAIN_CONFIG`, `config::load_dir_merging`).
///
/// # Errors
///
/// As [`reload`].
pub async fn reload_merging(engine: &Engine, dir: &Path, merge: bool) -> Result<usize, String> {
    let config = load_dir_merging(dir, merge).map_err(|e| e.to_string())?;
    let previous = engine.rules().by_slot();
    let compiled = Rules::compile(&config, engine.backend(), &previous).await?;
    let (kept, retuned, fresh) = (compiled.kept, compiled.retunes.len(), compiled.fresh);
    let rules = compiled.commit();
    let n = kept + retuned + fresh;
    engine.swap(rules);
    if config.domains.is_empty() {
        tracing::warn!(dir = %dir.display(), "no configuration file (*.yaml, *.yml): no request is limited");
    }
    tracing::info!(
        dir = %dir.display(),
        domains = config.domains.len(),
        limits = n,
        kept,
        retuned,
        new = fresh,
        "configuration loaded"
    );
    Ok(n)
}

/// What [`fingerprint`] returns.
pub type Fingerprint = Vec<(PathBuf, Option<SystemTime>, u64)>;

/// Reloads `dir` whenever its files change (checked every `interval`) or the process
/// gets SIGHUP; runs until the task is dropped. `loaded` is the directory's fingerprint
/// taken before the configuration being served was read (so that a change made while the
/// process starts is not missed); `merge` as in [`reload_merging`].
pub async fn watch(
    engine: Arc<Engine>,
    dir: PathBuf,
    interval: Duration,
    loaded: Fingerprint,
    merge: bool,
) {
    let mut last = loaded;
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; reloading on file changes only");
            None
        }
    };
    // The first check one interval from now (a plain `interval` ticks at once, and a
    // change written between the fingerprint above and that tick would be reloaded with
    // no signal and no interval elapsed).
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + interval, interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let signalled = tokio::select! {
            _ = tick.tick() => false,
            Some(()) = async { match hup.as_mut() { Some(h) => h.recv().await, None => std::future::pending().await } } => true,
        };
        let now = fingerprint(&dir);
        if !signalled && now == last {
            continue;
        }
        last = now;
        if signalled {
            tracing::info!("SIGHUP: reloading the configuration");
        }
        if let Err(e) = reload_merging(&engine, &dir, merge).await {
            crate::stats::call("reload", "error");
            tracing::error!(error = %e, "configuration refused; the previous one keeps serving");
        } else {
            crate::stats::call("reload", "ok");
        }
    }
}
