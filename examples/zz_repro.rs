use std::time::Duration;
use tollgate::*;
fn main() {
    let clock = ManualClock::new();
    let q = |l: u32, p: u64, b: u32| Quota::new(l, Duration::from_nanos(p)).with_burst(b);
    let k = KeyedRateLimiter::<u64, _>::builder(Algorithm::LeakyBucket, q(2, 999999999, 4))
        .tiers([q(3, 999999999, 8), q(3, 100000000, 5)])
        .max_keys(1).on_full(OnFull::Deny).clock(clock.clone()).build().unwrap();
    let wall = RateLimiter::builder(Algorithm::FixedWindow, Quota::per_hour(100)).clock(clock.clone()).build().unwrap();
    wall.check_n(100).unwrap();
    k.tier(1).unwrap().set_quota(q(5, 1000, 6)).unwrap();
    k.tier(0).unwrap().set_quota(q(4, 100000000, 4)).unwrap();
    let d = check_all(&[&k.tier(0).unwrap().limit(&5) as &dyn Limit, &wall], 4).unwrap();
    println!("ca {:?}", d);
    println!("{:?}", k.tier(2).unwrap().check_n(&7, 4));
    println!("{:?}", k.tier(2).unwrap().check_n(&5, 1));
    println!("{:?}", k.tier(0).unwrap().check_n(&9, 4));
    k.tier(0).unwrap().set_quota(q(4, 100000000, 4)).unwrap();
    clock.advance(Duration::from_nanos(42203));
    println!("peek5 t2 {:?}", k.tier(2).unwrap().peek_n(&5, 0));
    k.tier(0).unwrap().set_quota(q(4, 3600000000000, 4)).unwrap();
    println!("peek5 t2 {:?}", k.tier(2).unwrap().peek_n(&5, 0));
    k.tier(0).unwrap().set_quota(q(4, 100000000, 4)).unwrap();
    println!("peek5 t2 {:?}", k.tier(2).unwrap().peek_n(&5, 0));
    let d = check_all(&[&k.tier(0).unwrap().limit(&5) as &dyn Limit, &wall], 4).unwrap();
    println!("ca {:?}", d);
    println!("peek5 t2 {:?}", k.tier(2).unwrap().peek_n(&5, 0));
    println!("{:?}", k.tier(2).unwrap().check_n(&7, 4));
    println!("{:?}", k.tier(2).unwrap().check_n(&5, 1));
}
