//! Integration tests of the distributed mode against a real `redis-server`, started by
//! the tests themselves on a free loopback port (binary from `REDIS_SERVER` or `PATH`),
//! and a three-primary Redis Cluster: the one named by `TOLLGATE_REDIS_CLUSTER` (which
//! `scripts/test redis` starts), else one the cluster tests start themselves.
#![cfg(feature = "redis")]

mod carry_over;
mod charge;
mod cluster;
mod differential;
mod edges;
mod exact;
mod failure;
mod hybrid;
mod hybrid_peek;
mod keys;
mod multi;
mod multi_cost;
mod multi_differential;
mod overshoot_faults;
mod peek;
mod server;
mod set_quota;
mod sync_scale;
mod system_clock;
