//! The HTTP middleware end to end: real axum and tonic servers on 127.0.0.1 and real
//! clients (hyper-util, tonic's channel).

mod axum_server;
mod backends;
mod budget;
// The example's router, whose printed curl lines tests/http/example_axum.rs checks.
#[allow(dead_code)]
#[path = "../../examples/axum.rs"]
mod axum_example;
mod example_axum;
mod grpc;
// The example's gateway, which tests/http/budget.rs serves.
#[allow(dead_code)]
#[path = "../../examples/llm_budget.rs"]
mod llm_budget;
mod missing_key;
mod readme;
#[cfg(feature = "redis")]
mod redis_backed;
#[cfg(feature = "redis")]
mod redis_budget;
#[cfg(feature = "redis")]
#[allow(dead_code)]
#[path = "../redis/server.rs"]
mod redis_server;
mod spoofing;
mod support;
