//! `--api inproc`: the server's decision path called in this process, no network.

use crate::{request, Args};
use std::time::{Duration, Instant};
use tollgate_server::backend::{Backend, BackendConfig};
use tollgate_server::engine::{Engine, InputLimits};
use tollgate_server::proto::RateLimitRequest;
use tollgate_server::rules::Rules;

/// Decisions on this thread for `--seconds`; prints the rate and the time per decision.
pub(crate) async fn run(a: &Args) {
    let dir = a.config.as_ref().expect("--api inproc needs --config DIR");
    let config = tollgate_server::config::load_dir(dir).expect("config");
    let backend = Backend::new(BackendConfig::default())
        .await
        .expect("backend");
    let rules = Rules::compile(&config, &backend, &Default::default())
        .await
        .expect("rules")
        .commit();
    let engine = Engine::new(rules, backend, Default::default(), InputLimits::default());
    let reqs: Vec<RateLimitRequest> = (0..a.keys.min(100_000)).map(|i| request(a, i)).collect();
    let start = Instant::now();
    let end = start + Duration::from_secs(a.seconds);
    let mut n = 0u64;
    while Instant::now() < end {
        for i in 0..1024 {
            let r = &reqs[(n as usize + i) % reqs.len()];
            let _ = std::hint::black_box(engine.decide(std::hint::black_box(r)).await);
        }
        n += 1024;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "api=inproc seconds={} decisions={n} rate={:.0}/s per_decision={:.0}ns",
        a.seconds,
        n as f64 / secs,
        secs * 1e9 / n as f64
    );
}
