//! The layer's `metrics` series: decisions by policy and outcome, never by key.

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;

use crate::sync::{Ordering, PlainAtomicU64 as AtomicU64, StdArc as Arc, StdMutex as Mutex};
use metrics::{
    Counter, CounterFn, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit,
};
use tower_layer::Layer;
use tower_service::Service;

use super::*;
use crate::http::{ClientIp, Global, PeerAddr};
use crate::{keyed::KeyedRateLimiter, limiter::RateLimiter, quota::Algorithm, quota::Quota};

/// A recorder keeping every counter by its rendered key.
#[derive(Default)]
struct Counters(Mutex<HashMap<String, Arc<AtomicU64>>>);

struct Cell(Arc<AtomicU64>);

impl CounterFn for Cell {
    fn increment(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    fn absolute(&self, n: u64) {
        self.0.store(n, Ordering::Relaxed);
    }
}

impl Recorder for Counters {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        let mut labels: Vec<String> = key
            .labels()
            .map(|l| format!("{}={}", l.key(), l.value()))
            .collect();
        labels.sort();
        let name = format!("{}{{{}}}", key.name(), labels.join(","));
        let cell = Arc::clone(self.0.lock().unwrap().entry(name).or_default());
        Counter::from_arc(Arc::new(Cell(cell)))
    }
    fn register_gauge(&self, _: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::noop()
    }
    fn register_histogram(&self, _: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::noop()
    }
}

impl Counters {
    fn get(&self, name: &str) -> u64 {
        self.0
            .lock()
            .unwrap()
            .get(name)
            .map_or(0, |c| c.load(Ordering::Relaxed))
    }
}

#[derive(Clone)]
struct Ok200;

impl Service<Request<()>> for Ok200 {
    type Response = Response<String>;
    type Error = Infallible;
    type Future = std::future::Ready<Result<Response<String>, Infallible>>;
    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }
    fn call(&mut self, _: Request<()>) -> Self::Future {
        std::future::ready(Ok(Response::new(String::new())))
    }
}

fn status<S>(svc: &mut S, peer: bool) -> u16
where
    S: Service<Request<()>, Response = Response<ResponseBody<String>>, Error = Infallible>,
{
    let mut req = Request::new(());
    if peer {
        req.extensions_mut()
            .insert(PeerAddr("192.0.2.1:1".parse().unwrap()));
    }
    let waker = std::task::Waker::from(Arc::new(Noop));
    let mut cx = Context::from_waker(&waker);
    match std::pin::pin!(svc.call(req)).as_mut().poll(&mut cx) {
        Poll::Ready(Ok(r)) => r.status().as_u16(),
        _ => unreachable!("answers at once"),
    }
}

struct Noop;
impl std::task::Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

#[test]
fn decisions_by_policy_and_outcome_never_by_key() {
    let rec = Counters::default();
    let mut svc = metrics::with_local_recorder(&rec, || {
        let one = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(2))
            .build()
            .unwrap();
        let ip = KeyedRateLimiter::<std::net::IpAddr>::builder(
            Algorithm::FixedWindow,
            Quota::per_minute(1),
        )
        .build()
        .unwrap();
        RateLimitLayer::new(Policy::new("g", one, Global))
            .policy(Policy::new("trial", ip, ClientIp::peer()).shadow())
            .layer(Ok200)
    });
    assert_eq!(status(&mut svc, true), 200);
    assert_eq!(status(&mut svc, true), 200); // trial would have limited
    assert_eq!(status(&mut svc, false), 429); // no peer: trial cannot key it
    assert_eq!(
        rec.get("tollgate_decisions_total{outcome=allowed,policy=g}"),
        2
    );
    assert_eq!(
        rec.get("tollgate_decisions_total{outcome=limited,policy=g}"),
        1
    );
    assert_eq!(
        rec.get("tollgate_decisions_total{outcome=allowed,policy=trial}"),
        1
    );
    assert_eq!(
        rec.get("tollgate_decisions_total{outcome=shadow,policy=trial}"),
        1
    );
    assert_eq!(rec.get("tollgate_missing_keys_total{policy=trial}"), 0);
    assert!(rec
        .0
        .lock()
        .unwrap()
        .keys()
        .all(|k| !k.contains("192.0.2.1")));
}
