// The README is the crate's front page. Its guide links point at the chapters' source files,
// which is what a reader of the repository wants; the definitions below come first, and the
// first definition of a link label wins, so the same links lead to the rendered chapters here.
#![doc = "[choosing]: crate::guide::choosing"]
#![doc = "[keyed]: crate::guide::keyed"]
#![doc = "[reservations]: crate::guide::reservations"]
#![doc = "[several_limits]: crate::guide::several_limits"]
#![doc = "[quotas]: crate::guide::quotas"]
#![doc = "[budgets]: crate::guide::budgets"]
#![doc = "[redis]: crate::guide::redis"]
#![doc = "[middleware]: crate::guide::middleware"]
#![doc = "[testing]: crate::guide::testing"]
#![doc = "[promises]: crate::guide::promises"]
#![doc = ""]
#![doc = include_str!("../README.md")]
#![cfg_attr(docsrs, feature(doc_cfg))]
// One module may hold `unsafe` code, `machine` (the inline 16-byte atomics); see there.
#![deny(unsafe_code)]

mod algorithm;
mod cell;
mod charge;
mod clock;
mod decision;
mod error;
pub mod guide;
mod keyed;
mod limiter;
#[cfg(tollgate_loom)]
#[doc(hidden)]
pub mod loom_hooks;
#[cfg(not(tollgate_loom))]
#[allow(unsafe_code)]
mod machine;
mod multi;
mod ordering;
mod quota;
#[cfg(feature = "redis")]
#[cfg_attr(docsrs, doc(cfg(feature = "redis")))]
pub mod redis;
mod reservation;
mod store;
mod sync;
mod table;
mod wait;

pub use charge::Charge;
pub use clock::SystemClock;
pub use clock::{Clock, CoarseClock, CoarseClockError, ManualClock, QuantaClock};
pub use decision::Decision;
pub use error::{ConfigError, InsufficientCapacity};
pub use keyed::{KeyLimit, KeyedRateLimiter, KeyedRateLimiterBuilder, OnFull, Stats, Tier};
pub use limiter::{RateLimiter, RateLimiterBuilder};
pub use multi::{check_all, check_all_costs, Limit, MultiDecision};
pub use quota::{Algorithm, Quota};
pub use reservation::{Reservation, ReserveError};
#[cfg(feature = "tower")]
#[cfg_attr(docsrs, doc(cfg(feature = "tower")))]
pub mod http;
#[cfg(feature = "metrics")]
#[cfg_attr(docsrs, doc(cfg(feature = "metrics")))]
pub mod metrics;
