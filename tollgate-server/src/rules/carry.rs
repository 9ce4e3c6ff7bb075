//! What a limit changed at reload keeps of what its keys used.
//!
//! A limit is "the same limit" across reloads when it sits at the same place: the same
//! domain and the same path of descriptor keys and values ([`super::Rule::slot`]). When its
//! `rate_limit` changes, the keys' counts follow it as far as the engine can carry them:
//!
//! * nothing that decides changed (only the name, `replaces`, shadow mode, metrics): the
//!   same limiter, counts untouched;
//! * the same algorithm and table with another quota: the same limiter, given the new quota
//!   with the library's `set_quota` when the new configuration is committed (what each key
//!   used carries over; a lowered limit denies at once what is already past it);
//! * anything else (another algorithm; in process, a window's other period, a sliding log's
//!   limit above the one its rings hold, another `max_keys` or `on_full`): a new limiter,
//!   and the reason the counts could not follow is logged. On Redis the counts live under a
//!   key named by the limit's place and algorithm, so a new limiter of the same algorithm
//!   still reads them there.

use super::Rule;
use crate::backend::{LimitParams, Limiter, Mode};
use std::sync::Arc;
use tollgate::{Algorithm, Quota};

/// What becomes of a limit's limiter at reload.
#[derive(Debug)]
pub enum Carry {
    /// The same limiter, as it is.
    Keep(Arc<Limiter>),
    /// The same limiter, given `quota` when the configuration is committed.
    Retune(Arc<Limiter>, Quota),
    /// A new limiter. `lost` says why what keys used could not follow (`None`: there was
    /// nothing to carry, the previous limit counted nothing).
    Fresh {
        /// Why the counts are not carried, when there were counts.
        lost: Option<String>,
    },
}

fn is_window(a: Algorithm) -> bool {
    matches!(a, Algorithm::FixedWindow | Algorithm::SlidingWindow)
}

/// Decides what the limit `old` becomes when the same place now asks for `new`.
pub fn plan(old: &Rule, new: &LimitParams, mode: Mode) -> Carry {
    let was = &old.params;
    let same_table = was.max_keys == new.max_keys && was.on_full == new.on_full;
    let (old_q, new_q) = match (was.quota, new.quota) {
        (None, None) => return Carry::Keep(Arc::clone(&old.limiter)),
        (None, Some(_)) => return Carry::Fresh { lost: None },
        (Some(_), None) => {
            return Carry::Fresh {
                lost: Some("the limit is now 0 requests: nothing is counted under it".into()),
            }
        }
        (Some(a), Some(b)) => (a, b),
    };
    if was.algorithm != new.algorithm {
        return Carry::Fresh {
            lost: Some(format!(
                "the algorithm changed from {:?} to {:?}: one's state cannot be read as the other's",
                was.algorithm, new.algorithm
            )),
        };
    }
    // Exact mode keeps no table in this process: max_keys and on_full do not apply.
    if mode != Mode::Exact && !same_table {
        return Carry::Fresh {
            lost: Some(format!(
                "max_keys/on_full changed ({}/{:?} to {}/{:?}): a new table holds the keys",
                was.max_keys, was.on_full, new.max_keys, new.on_full
            )),
        };
    }
    if old_q == new_q {
        return Carry::Keep(Arc::clone(&old.limiter));
    }
    if mode == Mode::Local {
        if is_window(new.algorithm) && old_q.period() != new_q.period() {
            return Carry::Fresh {
                lost: Some(format!(
                    "the window changed from {:?} to {:?}: a count of one window is not a count of the other",
                    old_q.period(),
                    new_q.period()
                )),
            };
        }
        if new.algorithm == Algorithm::SlidingLog && new_q.limit() > old.ring_limit {
            return Carry::Fresh {
                lost: Some(format!(
                    "the sliding log's rings hold {} entries per key, fewer than the new limit {}",
                    old.ring_limit,
                    new_q.limit()
                )),
            };
        }
    }
    Carry::Retune(Arc::clone(&old.limiter), new_q)
}
