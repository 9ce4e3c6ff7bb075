//! Async waiting: waiters are served in the order they arrived, each at (not before,
//! and not long after) the time it booked; a dropped waiter gives its place back.

use std::sync::Arc;
use std::time::{Duration, Instant};
use tollgate::{Algorithm, KeyedRateLimiter, Quota, RateLimiter};

const SPACING: Duration = Duration::from_millis(5);
/// Generous: shared CI machines stall; the order and the lower bound are exact.
const LATE: Duration = Duration::from_millis(250);

#[tokio::test(flavor = "current_thread")]
async fn waiters_are_served_in_order_at_their_booked_time() {
    for a in [
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::SlidingLog,
    ] {
        let q = match a {
            Algorithm::SlidingLog => Quota::new(1, SPACING),
            _ => Quota::new(1, SPACING).with_burst(1),
        };
        let l = Arc::new(RateLimiter::builder(a, q).build().unwrap());
        let start = Instant::now();
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        // Spawned in order on one thread: each books on its first poll, in this order.
        for i in 0..16u32 {
            let (l, tx) = (l.clone(), tx.clone());
            tokio::spawn(async move {
                l.until_ready().await.unwrap();
                tx.send((i, start.elapsed())).unwrap();
            });
        }
        drop(tx);
        let mut served = Vec::new();
        while let Some(x) = rx.recv().await {
            served.push(x);
        }
        let order: Vec<u32> = served.iter().map(|s| s.0).collect();
        assert_eq!(
            order,
            (0..16).collect::<Vec<_>>(),
            "{a:?}: served out of order"
        );
        for (i, at) in served {
            let booked = SPACING * i;
            assert!(
                at + Duration::from_millis(1) >= booked,
                "{a:?}: waiter {i} early: {at:?}"
            );
            assert!(
                at <= booked + LATE,
                "{a:?}: waiter {i} late: {at:?} for {booked:?}"
            );
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn keyed_waiters_of_one_key_do_not_delay_another() {
    let l = Arc::new(
        KeyedRateLimiter::<str>::builder(
            Algorithm::TokenBucket,
            Quota::new(1, SPACING).with_burst(1),
        )
        .build()
        .unwrap(),
    );
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..10 {
        let l = l.clone();
        tasks.push(tokio::spawn(
            async move { l.until_ready("busy").await.unwrap() },
        ));
    }
    l.until_ready("idle").await.unwrap();
    assert!(
        start.elapsed() < SPACING * 5,
        "another key's queue delayed this one"
    );
    for t in tasks {
        t.await.unwrap();
    }
    assert!(start.elapsed() + Duration::from_millis(1) >= SPACING * 9);
}

/// A waiter dropped before its turn (a timeout, a client gone) gives its place back:
/// the next booking is served where the dropped one would have been.
#[tokio::test(flavor = "current_thread")]
async fn dropping_a_waiter_cancels_its_booking() {
    let period = Duration::from_millis(400);
    let l = RateLimiter::builder(Algorithm::TokenBucket, Quota::new(1, period).with_burst(1))
        .build()
        .unwrap();
    l.until_ready().await.unwrap(); // takes the burst
    let gave_up = tokio::time::timeout(Duration::from_millis(20), l.until_ready()).await;
    assert!(
        gave_up.is_err(),
        "the second waiter should still be waiting"
    );
    let next = l.reserve(1, Duration::from_secs(5)).unwrap();
    assert!(
        next.wait_time() < period,
        "the dropped waiter kept its place: {:?}",
        next.wait_time()
    );
}

#[test]
fn blocking_waiters_are_spaced() {
    let l = RateLimiter::builder(
        Algorithm::FixedWindow,
        Quota::new(2, Duration::from_millis(20)),
    )
    .build()
    .unwrap();
    let start = Instant::now();
    for _ in 0..6 {
        l.wait_blocking(1, Duration::ZERO).unwrap();
    }
    // Three windows of two: at least two window boundaries crossed.
    assert!(start.elapsed() >= Duration::from_millis(20));
}
