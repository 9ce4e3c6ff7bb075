//! `--api grpc` (tonic's client) and `--api json` (hyper's HTTP/1.1 client): one task per
//! call in flight, each awaiting its call before starting the next.

use crate::{report, request, Args, Plan, Tally};
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Instant;
use tollgate_server::proto::rate_limit_service::rate_limit_service_client::RateLimitServiceClient;

/// Runs `--concurrency` workers until the plan's end (or their share of `--requests`),
/// then prints the report.
pub(crate) async fn run(a: Arc<Args>) {
    let began = Instant::now();
    let plan = Plan::new(&a, began);
    let workers = a.concurrency.max(1) as u64;
    let mut channels = Vec::new();
    if a.api == "grpc" {
        for _ in 0..a.connections.max(1) {
            let ch = tonic::transport::Endpoint::from_shared(format!("http://{}", a.target))
                .expect("target")
                .tcp_nodelay(true)
                .connect()
                .await
                .expect("connect");
            channels.push(ch);
        }
    }
    let http = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(a.concurrency)
        .build_http::<Full<Bytes>>();
    let mut tasks = Vec::new();
    for w in 0..a.concurrency {
        let a = Arc::clone(&a);
        let grpc = channels
            .get(w % channels.len().max(1))
            .cloned()
            .map(RateLimitServiceClient::new);
        let http = http.clone();
        let plan = plan.part(w as u64, workers);
        tasks.push(tokio::spawn(async move {
            let mut t = Tally {
                lat_us: Vec::with_capacity(1 << 16),
                ..Tally::default()
            };
            let mut i = w as u64;
            let mut sent = 0u64;
            loop {
                let start = Instant::now();
                if start >= plan.end || plan.share.is_some_and(|p| sent >= p) {
                    break;
                }
                sent += 1;
                let req = request(&a, i);
                i += a.concurrency as u64;
                let code = if let Some(mut c) = grpc.clone() {
                    c.should_rate_limit(req)
                        .await
                        .map(|r| r.into_inner().overall_code)
                        .ok()
                } else {
                    let body = format!(
                        r#"{{"domain":"{}","descriptors":[{{"entries":[{{"key":"{}","value":"{}"}}]}}]}}"#,
                        req.domain, req.descriptors[0].entries[0].key, req.descriptors[0].entries[0].value
                    );
                    let r = hyper::Request::post(format!("http://{}/json", a.target))
                        .body(Full::new(Bytes::from(body)))
                        .expect("request");
                    match http.request(r).await {
                        Ok(resp) => {
                            let s = resp.status().as_u16();
                            let _ = resp.into_body().collect().await;
                            match s {
                                200 => Some(1),
                                429 => Some(2),
                                _ => None,
                            }
                        }
                        Err(_) => None,
                    }
                };
                if start < plan.warm {
                    continue;
                }
                let done = Instant::now();
                if done > plan.end {
                    break;
                }
                t.lat_us.push(u32::try_from(done.duration_since(start).as_micros()).unwrap_or(u32::MAX));
                match code {
                    Some(2) => t.over += 1,
                    Some(_) => {}
                    None => t.errors += 1,
                }
            }
            t
        }));
    }
    let mut all = Tally::default();
    for task in tasks {
        all.merge(task.await.expect("worker"));
    }
    // The measured time: the whole run with --requests, else the window.
    let secs = match a.requests {
        Some(_) => began.elapsed().as_secs_f64(),
        None => a.seconds as f64,
    };
    report(&a, all, secs);
}
