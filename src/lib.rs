#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_op_in_unsafe_fn)]

mod algorithm;
mod cell;
mod clock;
mod decision;
mod error;
mod keyed;
mod limiter;
mod quota;
#[cfg(feature = "redis")]
pub mod redis;
mod sync;

pub use algorithm::Algorithm;
pub use clock::{Clock, ManualClock, QuantaClock};
pub use decision::Decision;
pub use error::{ConfigError, InsufficientCapacity};
pub use keyed::{KeyedRateLimiter, KeyedRateLimiterBuilder, OnFull, Stats};
pub use limiter::{RateLimiter, RateLimiterBuilder};
pub use quota::Quota;
