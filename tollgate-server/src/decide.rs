//! Deciding the matched limits of one request on the backend: the enforced ones all or
//! nothing, the quota-mode and shadow-mode ones each on its own.

use crate::backend::Limiter;
use crate::in_process;
use crate::rules::Rule;
use crate::stats::StatKey;
use std::sync::Arc;
use tollgate::Decision;

/// Why a call was not decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecideError {
    /// The request is malformed (gRPC INVALID_ARGUMENT, HTTP 400).
    InvalidArgument(String),
    /// The backend could not decide (gRPC UNAVAILABLE, HTTP 500).
    Unavailable(String),
}

impl std::fmt::Display for DecideError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecideError::InvalidArgument(m) => write!(f, "invalid request: {m}"),
            DecideError::Unavailable(m) => write!(f, "backend unavailable: {m}"),
        }
    }
}

/// One descriptor's limit for this call.
#[derive(Debug)]
pub struct Item {
    /// The limit (`None`: nothing matched, or replaced).
    pub rule: Option<Arc<Rule>>,
    /// The counting key.
    pub key: String,
    /// Hits to add (0: check only, nothing is counted), or to give back.
    pub hits: u64,
    /// The descriptor gives its hits back (`is_negative_hits`).
    pub give_back: bool,
    /// The request's own stat key (`detailed_metric`, overrides).
    pub detailed: Option<StatKey>,
}

/// The limiter of an item that has a rule.
pub fn limiter(it: &Item) -> Option<&Limiter> {
    it.rule.as_ref().map(|r| &*r.limiter)
}

/// What one descriptor's limit said.
#[derive(Debug, Clone, Copy)]
pub enum Outcome {
    /// No limit applies.
    None,
    /// The engine's decision (for 0 hits: the key's state, always admitted).
    Decided(Decision),
    /// Denied without asking the engine: a limit of 0, or more hits than it ever holds.
    Over,
    /// Not denied, and nothing known of the key: another limit of the request denied
    /// first (Redis modes), or 0 hits on a limit of 0.
    Unknown,
    /// The engine would have admitted these hits, but another limit denied the request,
    /// so nothing was taken: the decision as asked, and the hits it did not take.
    Unbooked(Decision, u32),
    /// A budget's charge, or its check of 0 hits (a charge of 0): the state after it as a
    /// request of 1 would see it, whether the key owes nothing then, and what it has left.
    /// (Also what Redis says of hits a denied request did not take and that would not have
    /// fit: the key's state, `fit` false.)
    Charged {
        /// The engine's `Charge::decision()`.
        decision: Decision,
        /// The key owes nothing after the charge (for a check: it owes nothing now).
        fit: bool,
        /// What the key has left after the charge.
        left: u32,
    },
    /// Hits given back (`is_negative_hits`): the key's state after, when known.
    GivenBack(Option<Decision>),
}

impl Outcome {
    /// Whether this limit denied.
    pub fn denied(&self) -> bool {
        match self {
            Outcome::Decided(d) => !d.is_allowed(),
            Outcome::Over => true,
            Outcome::Charged { fit, .. } => !fit,
            Outcome::None | Outcome::Unknown | Outcome::Unbooked(..) | Outcome::GivenBack(_) => {
                false
            }
        }
    }

    /// What the key has left, as reported: a denial leaves nothing to report (as
    /// envoyproxy/ratelimit reports 0), an unbooked decision what the key has without the
    /// hits it did not take.
    pub fn remaining(&self) -> u32 {
        match self {
            Outcome::Decided(d) if d.is_allowed() => d.remaining(),
            Outcome::Unbooked(d, hits) => d.remaining().saturating_add(*hits).min(d.burst()),
            Outcome::Charged {
                fit: true, left, ..
            } => *left,
            Outcome::GivenBack(Some(d)) => d.remaining(),
            _ => 0,
        }
    }

    /// The engine's decision, when it was asked.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Outcome::Decided(d) | Outcome::Unbooked(d, _) => Some(d),
            Outcome::Charged { decision, .. } => Some(decision),
            Outcome::GivenBack(d) => d.as_ref(),
            _ => None,
        }
    }
}

/// `d` for hits that were not taken because the request was denied elsewhere.
fn unbooked(d: Decision, hits: u32, request_allowed: bool) -> Outcome {
    if request_allowed || !d.is_allowed() {
        Outcome::Decided(d)
    } else {
        Outcome::Unbooked(d, hits)
    }
}

/// The most hits one call of `l` can ever admit.
fn capacity(l: &Limiter) -> u64 {
    u64::from(match l {
        Limiter::Local(k) => k.burst(),
        Limiter::Exact(r) => r.burst(),
        Limiter::Hybrid(h) => h.quota().burst(),
        Limiter::Zero => 0,
    })
}

/// What `n` hits would get, counting nothing: a peek in process; on Redis, asked only
/// for 0 hits (the key's state, by a peek that writes and inserts nothing), else not asked.
async fn look(l: &Limiter, key: &str, n: u64) -> Outcome {
    let n32 = u32::try_from(n).unwrap_or(u32::MAX);
    match l {
        Limiter::Local(k) => k.peek_n(key, n32).map_or(Outcome::Over, Outcome::Decided),
        Limiter::Zero if n == 0 => Outcome::Unknown,
        Limiter::Zero => Outcome::Over,
        Limiter::Exact(r) if n == 0 => Box::pin(r.peek_n(key, 0))
            .await
            .map_or(Outcome::Unknown, Outcome::Decided),
        Limiter::Hybrid(h) if n == 0 => h.peek_n(key, 0).map_or(Outcome::Unknown, Outcome::Decided),
        Limiter::Exact(_) | Limiter::Hybrid(_) => Outcome::Unknown,
    }
}

/// Fills `out` for the limits `idx` of a request denied before they took anything: what
/// their hits would have got, and for a limit that would have admitted them, what its key
/// has (nothing was taken). Redis, which is asked only for 0 hits, says what the key has;
/// hits past it would not have fit.
pub async fn look_unbooked(items: &[Item], idx: &[usize], out: &mut [Outcome]) {
    for &i in idx {
        let Some(l) = limiter(&items[i]) else {
            continue;
        };
        let (key, hits) = (items[i].key.as_str(), items[i].hits);
        let n = u32::try_from(hits).unwrap_or(u32::MAX);
        out[i] = match look(l, key, hits).await {
            Outcome::Decided(d) => unbooked(d, n, false),
            Outcome::Unknown if hits > 0 => match look(l, key, 0).await {
                Outcome::Decided(d) if d.remaining() >= n => Outcome::Unbooked(d, 0),
                Outcome::Decided(d) => Outcome::Charged {
                    decision: d,
                    fit: false,
                    left: 0,
                },
                other => other,
            },
            other => other,
        };
    }
}

/// Whether every limit `idx` would deny its hits now (in process; elsewhere `false`: not
/// known without counting).
pub fn all_over(items: &[Item], idx: &[usize]) -> bool {
    !idx.is_empty()
        && idx.iter().all(|&i| {
            let Some(l) = limiter(&items[i]) else {
                return false;
            };
            let n = u32::try_from(items[i].hits).unwrap_or(u32::MAX);
            match l {
                Limiter::Local(k) => {
                    n > 0 && k.peek_n(&items[i].key, n).map_or(true, |d| !d.is_allowed())
                }
                Limiter::Zero => n > 0,
                _ => false,
            }
        })
}

/// Fills `out` for the limits `idx` with what their hits would get, counting nothing.
pub async fn look_all(items: &[Item], idx: &[usize], out: &mut [Outcome]) {
    for &i in idx {
        if let Some(l) = limiter(&items[i]) {
            out[i] = look(l, &items[i].key, items[i].hits).await;
        }
    }
}

/// The request's error for a Redis error.
pub(crate) fn redis_error(e: &tollgate::redis::Error) -> DecideError {
    use tollgate::redis::Error as E;
    match e {
        E::DuplicateKey { .. } | E::CrossSlot { .. } => {
            DecideError::InvalidArgument(format!("descriptors cannot be decided together: {e}"))
        }
        _ => DecideError::Unavailable(e.to_string()),
    }
}

/// Decides the enforced limits `idx` of `items` all or nothing; fills `out` and says
/// whether the request is admitted.
///
/// The in-process limits are decided by `in_process::decide`: one limit by its own
/// `check_n`, several by the library's `check_all_costs`, each limit with its
/// descriptor's own hits (one protocol whether the hits are equal or not: a leaky bucket
/// admits a request it only delays); on Redis they are decided in groups of equal cost,
/// each group all or nothing.
///
/// # Errors
///
/// [`DecideError`] when Redis cannot decide under the `error` failure policy.
pub async fn decide_enforced(
    items: &[Item],
    idx: &[usize],
    out: &mut [Outcome],
) -> Result<bool, DecideError> {
    let lim = |i: usize| limiter(&items[i]).expect("enforced items have a limit");
    // A request no limit could ever admit is denied before anything is booked.
    let impossible = |i: usize| items[i].hits > capacity(lim(i));
    if idx.iter().any(|&i| impossible(i)) {
        for &i in idx {
            out[i] = if impossible(i) {
                Outcome::Over
            } else {
                look(lim(i), &items[i].key, items[i].hits).await
            };
        }
        return Ok(false);
    }
    // Checks of 0 hits only look; the others are booked (counted first, so that the
    // usual request of one booking needs no list).
    let (mut count, mut last) = (0, 0);
    for &i in idx {
        if items[i].hits == 0 {
            out[i] = look(lim(i), &items[i].key, 0).await;
        } else {
            count += 1;
            last = i;
        }
    }
    if count == 0 {
        return Ok(true);
    }
    let booked = || idx.iter().copied().filter(|&i| items[i].hits > 0);
    // Every hit count fits in u32 here: it is at most a u32 capacity.
    let n = |i: usize| u32::try_from(items[i].hits).unwrap_or(u32::MAX);
    let local = |i: usize| match lim(i) {
        Limiter::Local(k) => (k, items[i].key.as_str(), n(i)),
        _ => unreachable!("one backend per server; zero limits are impossible above"),
    };
    let invalid = |e: tollgate::InsufficientCapacity| DecideError::InvalidArgument(e.to_string());
    match lim(last) {
        Limiter::Local(_) | Limiter::Zero if count == 1 => {
            // The usual request: one limit, no list.
            let d = in_process::decide(&[local(last)]).map_err(invalid)?;
            out[last] = unbooked(d.decisions()[0], n(last), d.is_allowed());
            Ok(d.is_allowed())
        }
        Limiter::Local(_) | Limiter::Zero => {
            let limits: Vec<_> = booked().map(local).collect();
            let d = in_process::decide(&limits).map_err(invalid)?;
            for (i, dec) in booked().zip(d.decisions()) {
                out[i] = unbooked(*dec, n(i), d.is_allowed());
            }
            Ok(d.is_allowed())
        }
        Limiter::Exact(_) => {
            // One Redis key may appear only once per script: descriptors that resolve to
            // the same limit and key (Envoy can send a descriptor twice) are one booking
            // of their summed hits, and share its decision.
            let mut merged: Vec<(usize, Vec<usize>, u64)> = Vec::new();
            for i in booked() {
                let same = |&(rep, _, _): &(usize, Vec<usize>, u64)| {
                    std::ptr::eq(lim(rep), lim(i)) && items[rep].key == items[i].key
                };
                match merged.iter_mut().find(|m| same(m)) {
                    Some(m) => {
                        m.1.push(i);
                        m.2 = m.2.saturating_add(items[i].hits);
                    }
                    None => merged.push((i, vec![i], items[i].hits)),
                }
            }
            if merged
                .iter()
                .any(|(rep, _, hits)| *hits > capacity(lim(*rep)))
            {
                for (_, members, hits) in &merged {
                    for &i in members {
                        let over = *hits > capacity(lim(i));
                        out[i] = if over {
                            Outcome::Over
                        } else {
                            Outcome::Unknown
                        };
                    }
                }
                return Ok(false);
            }
            let mut costs: Vec<u64> = merged.iter().map(|m| m.2).collect();
            costs.sort_unstable();
            costs.dedup();
            for cost in costs {
                let group: Vec<&(usize, Vec<usize>, u64)> =
                    merged.iter().filter(|m| m.2 == cost).collect();
                let pairs: Vec<(&tollgate::redis::RedisRateLimiter, &str)> = group
                    .iter()
                    .map(|&&(rep, _, _)| match lim(rep) {
                        Limiter::Exact(r) => (r, items[rep].key.as_str()),
                        _ => unreachable!("one backend per server"),
                    })
                    .collect();
                let n = u32::try_from(cost).unwrap_or(u32::MAX);
                // Boxed: the Redis call's future is large, and inline it would make
                // every call's future (the in-process ones too) as large.
                let md = Box::pin(tollgate::redis::check_all(&pairs, n))
                    .await
                    .map_err(|e| redis_error(&e))?;
                for (m, d) in group.iter().zip(md.decisions()) {
                    for &i in &m.1 {
                        out[i] = unbooked(*d, n, md.is_allowed());
                    }
                }
                if !md.is_allowed() {
                    return Ok(false);
                }
            }
            Ok(true)
        }
        Limiter::Hybrid(_) => {
            for i in booked() {
                let Limiter::Hybrid(h) = lim(i) else {
                    unreachable!("one backend per server")
                };
                let d = h
                    .check_n(items[i].key.as_str(), n(i))
                    .map_err(|e| DecideError::InvalidArgument(e.to_string()))?;
                out[i] = Outcome::Decided(d);
                if !d.is_allowed() {
                    return Ok(false);
                }
            }
            Ok(true)
        }
    }
}

/// Decides the limits `idx` each on its own (shadow-mode and quota-mode limits): each
/// counts its hits when they fit and `count` holds (the request goes through), else each
/// only looks.
pub async fn decide_each(items: &[Item], idx: &[usize], count: bool, out: &mut [Outcome]) {
    for &i in idx {
        let Some(l) = limiter(&items[i]) else {
            continue;
        };
        let key = items[i].key.as_str();
        let hits = items[i].hits;
        if hits > capacity(l) {
            out[i] = Outcome::Over;
            continue;
        }
        let n = u32::try_from(hits).unwrap_or(u32::MAX);
        if !count || n == 0 {
            out[i] = look(l, key, hits).await;
            continue;
        }
        out[i] = match l {
            Limiter::Local(k) => k.check_n(key, n).map_or(Outcome::Over, Outcome::Decided),
            Limiter::Exact(r) => Box::pin(r.check_n(key, n))
                .await
                .map_or(Outcome::Unknown, Outcome::Decided),
            Limiter::Hybrid(h) => h.check_n(key, n).map_or(Outcome::Over, Outcome::Decided),
            Limiter::Zero => Outcome::Over,
        };
    }
}

/// envoyproxy/ratelimit's counting (`--count-denied-hits`): each limit `idx` decided on
/// its own, counting its hits when they fit whatever the others say; a limit that denies
/// is charged what it had left, so that it stays over as upstream's `INCRBY` before
/// deciding leaves it. Returns whether none of them denied.
pub async fn decide_counting(items: &[Item], idx: &[usize], out: &mut [Outcome]) -> bool {
    decide_each(items, idx, true, out).await;
    let mut none_denied = true;
    for &i in idx {
        if out[i].denied() {
            none_denied = false;
            if let Some(l) = limiter(&items[i]) {
                take_rest(l, &items[i].key).await;
            }
        }
    }
    none_denied
}

/// Takes what `key` has left on `l`.
async fn take_rest(l: &Limiter, key: &str) {
    let Outcome::Decided(d) = look(l, key, 0).await else {
        return;
    };
    let rest = d.remaining();
    if rest == 0 {
        return;
    }
    // A failure here leaves the key as it was: the denial itself stands.
    match l {
        Limiter::Local(k) => {
            let _ = k.check_n(key, rest);
        }
        Limiter::Exact(r) => {
            let _ = Box::pin(r.check_n(key, rest)).await;
        }
        Limiter::Hybrid(h) => {
            let _ = h.check_n(key, rest);
        }
        Limiter::Zero => {}
    }
}
