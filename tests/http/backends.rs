//! Asynchronous backends (the path Redis takes) and backend failures, through a real
//! axum server.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tollgate::http::{
    Acquire, Backend, BackendError, Global, OnBackendError, Policy, RateLimitLayer,
};
use tollgate::{Algorithm, Quota, RateLimiter};

use crate::support::{get_with, parse_list, serve};

/// A limiter answered after a real timer, failing while `down` is set: what a network
/// backend looks like to the layer.
struct Remote {
    limiter: Arc<RateLimiter>,
    down: Arc<AtomicBool>,
}

impl Remote {
    fn answer(&self, cost: u32) -> Acquire {
        let (limiter, down) = (Arc::clone(&self.limiter), Arc::clone(&self.down));
        Acquire::pending(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if down.load(Ordering::SeqCst) {
                return Err(BackendError::unavailable("connection refused"));
            }
            limiter.check_n(cost).map_err(Into::into)
        })
    }
}

impl Backend<()> for Remote {
    fn quota(&self) -> Quota {
        self.limiter.quota()
    }
    fn acquire(&self, _: &(), cost: u32) -> Acquire {
        self.answer(cost)
    }
    fn peek(&self, _: &()) -> Acquire {
        self.answer(0)
    }
    fn is_async(&self) -> bool {
        true
    }
}

fn remote(limit: u32) -> (Remote, Arc<AtomicBool>) {
    let down = Arc::new(AtomicBool::new(false));
    let limiter = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(limit))
        .build()
        .unwrap();
    (
        Remote {
            limiter: Arc::new(limiter),
            down: Arc::clone(&down),
        },
        down,
    )
}

#[tokio::test]
async fn async_backend_limits_and_reports() {
    let (r, _) = remote(2);
    let local = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(10))
        .build()
        .unwrap();
    let layer = RateLimitLayer::new(Policy::new("remote", r, Global))
        .policy(Policy::new("local", local, Global));
    let addr = serve(layer).await;
    for left in [1, 0] {
        let reply = get_with(addr, &[]).await;
        assert_eq!(reply.status, 200);
        assert_eq!(
            parse_list(reply.header("ratelimit").unwrap())[0].param("r"),
            left
        );
    }
    let reply = get_with(addr, &[]).await;
    assert_eq!(reply.status, 429);
    assert!(
        reply.body.contains(r#""violated-policies":["remote"]"#),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn backend_failure_is_503_by_default_or_allowed_when_configured() {
    let (r, down) = remote(100);
    down.store(true, Ordering::SeqCst);
    let addr = serve(RateLimitLayer::new(Policy::new("remote", r, Global))).await;
    let reply = get_with(addr, &[]).await;
    assert_eq!(reply.status, 503);
    assert!(reply.body.contains("connection refused"), "{}", reply.body);

    let (r, down) = remote(100);
    down.store(true, Ordering::SeqCst);
    let open = RateLimitLayer::new(Policy::new("remote", r, Global))
        .on_backend_error(OnBackendError::Allow);
    let addr = serve(open).await;
    assert_eq!(get_with(addr, &[]).await.status, 200);
    down.store(false, Ordering::SeqCst);
    assert_eq!(get_with(addr, &[]).await.status, 200);
}

/// A backend whose peek always has room but whose acquire always denies: the state
/// another instance changed between the layer's peek and its acquire.
struct ChangesUnderfoot(Arc<RateLimiter>);

impl Backend<()> for ChangesUnderfoot {
    fn quota(&self) -> Quota {
        self.0.quota()
    }
    fn acquire(&self, _: &(), _cost: u32) -> Acquire {
        // A full limiter's honest denial.
        Acquire::ready(Ok(self.0.check()))
    }
    fn peek(&self, _: &()) -> Acquire {
        // Claims the quota's whole limit is left.
        let fresh = RateLimiter::builder(Algorithm::FixedWindow, self.0.quota())
            .build()
            .unwrap();
        Acquire::ready(Ok(fresh.check_n(0).unwrap()))
    }
}

/// When a later policy denies after an earlier in-process policy admitted, the earlier
/// one's admission is given back exactly (through its undo token), for every algorithm:
/// a denied request consumes nothing, even when the denial came late.
#[tokio::test]
async fn a_late_denial_gives_back_the_earlier_policies_admissions() {
    for a in Algorithm::ALL {
        let first = Arc::new(
            RateLimiter::builder(a, Quota::per_minute(2))
                .build()
                .unwrap(),
        );
        let full = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_minute(1))
            .build()
            .unwrap();
        assert!(full.check().is_allowed());
        let layer = RateLimitLayer::new(Policy::new("first", Arc::clone(&first), Global)).policy(
            Policy::new("late", ChangesUnderfoot(Arc::new(full)), Global),
        );
        let addr = serve(layer).await;
        for _ in 0..5 {
            let r = get_with(addr, &[]).await;
            assert_eq!(r.status, 429, "{a:?}");
            assert!(
                r.body.contains(r#""violated-policies":["late"]"#),
                "{a:?}: {}",
                r.body
            );
        }
        // Five admissions by `first` were all given back: its whole quota is left.
        assert_eq!(
            RateLimiter::peek(&first).remaining(),
            1,
            "{a:?}: a late denial kept capacity"
        );
    }
}
