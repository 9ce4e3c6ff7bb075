//! tollgate-server: an Envoy rate limit service (RLS v3 over gRPC, `POST /json`,
//! `GET /metrics`) on the tollgate engine, reading envoyproxy/ratelimit's configuration
//! directory as it is.
//!
//! The binary (`src/main.rs`) wires these modules together; they are a library so that the
//! integration tests and the load generator can use the protocol types.

#![forbid(unsafe_code)]

pub mod backend;
pub mod budget;
pub mod config;
pub mod decide;
pub mod digits;
pub mod engine;
pub mod grpc;
pub mod headers;
mod in_process;
pub mod json;
pub mod proto;
pub mod reload;
pub mod respond;
pub mod rules;
pub mod serve;
pub mod settings;
pub mod stats;
pub mod unknown;
