//! Asking every policy about one request: all-or-nothing over the enforced policies.

use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Wake, Waker};

use http::request::Parts;
use http::StatusCode;

use super::backend::{Acquire, BackendError, Undo};
use super::budget::{Admitted, BoundBudget};
use super::policy::BudgetSide;
use super::policy::{MissingKey, Policy};
use crate::decision::Decision;
use crate::sync::{OnceLock, StdArc as Arc};

/// What one policy said about this request.
#[derive(Debug)]
pub(crate) struct Report {
    pub(crate) policy: usize,
    /// `None` when the cost can never fit.
    pub(crate) decision: Option<Decision>,
}

impl Report {
    pub(crate) fn denied(&self) -> bool {
        self.decision.map_or(true, |d| !d.is_allowed())
    }
}

/// The reports of one request: inline for the common single policy.
#[derive(Debug)]
pub(crate) enum Reports {
    None,
    One(Report),
    Many(Vec<Report>),
}

impl std::ops::Deref for Reports {
    type Target = [Report];

    fn deref(&self) -> &[Report] {
        match self {
            Reports::None => &[],
            Reports::One(r) => std::slice::from_ref(r),
            Reports::Many(v) => v,
        }
    }
}

/// The layer's answer to one request.
#[derive(Debug)]
pub(crate) enum Verdict {
    /// Forward; the reports feed the headers (shadow denials included); the budget
    /// policies that admitted it are charged after the response.
    Pass(Reports, Admitted),
    /// Deny; the report of the denying policy (and shadow policies are not asked).
    Deny(Reports),
    /// A policy with [`MissingKey::Reject`] had no key.
    Reject(usize, StatusCode),
    /// A policy with [`MissingKey::Fail`] (the default) had no key.
    NoKey(usize),
    /// A backend failed.
    Failed(usize, BackendError),
}

/// The verdict on a request that enforced policy `i` cannot key: `None` lets it through
/// ([`MissingKey::Skip`]). Counted either way.
fn missing(p: &Policy, i: usize) -> Option<Verdict> {
    p.count_missing();
    match p.missing {
        MissingKey::Skip => None,
        MissingKey::Reject(status) => Some(Verdict::Reject(i, status)),
        MissingKey::Fail => Some(Verdict::NoKey(i)),
    }
}

async fn get(mut acquire: Acquire, at_once: bool) -> Result<Decision, BackendError> {
    if at_once {
        acquire.now().unwrap_or_else(|| {
            Err(BackendError::unavailable(
                "a backend whose is_async() is false returned a pending Acquire",
            ))
        })
    } else {
        acquire.await
    }
}

/// A budget policy's answer: what its key has left, peeked, never taken.
enum Budgeted {
    /// It has at least the policy's cost left: `decision` is the state at admission
    /// (`remaining` what is left), `bound` charges the key later.
    Admit {
        decision: Decision,
        left: u32,
        bound: Box<dyn BoundBudget>,
    },
    /// It has not (`None`: the cost can never fit).
    Deny(Option<Decision>),
    Failed(BackendError),
    NoKey,
}

/// Asks budget policy `p` whether the request's key has the policy's cost (default 1)
/// left, taking nothing: the state now, and when that is not enough, what a request of
/// the cost would get (a denial that says when it fits).
async fn peek_budget(p: &Policy, side: &BudgetSide, parts: &Parts, at_once: bool) -> Budgeted {
    let Some(bound) = side.backend.bind(parts, side.max_owed) else {
        return Budgeted::NoKey;
    };
    let need = p.cost_of(parts);
    // The state now (a peek of 0 reports what is left); when that is not enough, what a
    // request of `need` gets: a denial that says when it fits (or an admission, when
    // capacity came back in between: what is left is then its `remaining` and `need`).
    let (answer, asked) = match get(bound.peek_n(0), at_once).await {
        Ok(now) if now.remaining() >= need => (Ok(now), 0),
        Ok(_) => (get(bound.peek_n(need), at_once).await, need),
        Err(e) => (Err(e), 0),
    };
    match answer {
        Ok(d) if d.is_allowed() => Budgeted::Admit {
            left: d.remaining().saturating_add(asked),
            decision: d,
            bound,
        },
        Ok(d) => Budgeted::Deny(Some(d)),
        Err(BackendError::Capacity(_)) => Budgeted::Deny(None),
        Err(e) => Budgeted::Failed(e),
    }
}

/// What enforced policy `i` took: its cost, and the token that gives exactly that
/// back when the backend made one.
type Taken = (usize, u32, Option<Undo>);

/// The enforced policies' admissions so far on one request: what each took (to give
/// back if a later policy ends the request) and what each reported.
struct Admissions<'a> {
    policies: &'a [Policy],
    parts: &'a Parts,
    taken: Vec<Taken>,
    reports: Vec<Report>,
}

impl Admissions<'_> {
    /// Gives back what the policies acquired: exactly, through the backend's [`Undo`]
    /// token where it made one, else by its best effort
    /// ([`Backend::release`](super::Backend::release)). Newest first.
    fn release(&mut self) {
        while let Some((i, cost, undo)) = self.taken.pop() {
            let backend = &self.policies[i].backend;
            match undo {
                Some(u) => {
                    backend.undo(self.parts, u);
                }
                None => {
                    backend.release(self.parts, cost);
                }
            }
        }
    }

    /// Takes in enforced policy `i`'s answer to acquiring `cost` (with its undo token):
    /// an admission is recorded and `None` returned; anything else gives back what the
    /// earlier policies took and is the verdict that ends the request.
    fn settle(
        &mut self,
        answer: Result<Decision, BackendError>,
        i: usize,
        cost: u32,
        undo: Option<Undo>,
    ) -> Option<Verdict> {
        let end = match answer {
            Ok(d) if d.is_allowed() => {
                self.taken.push((i, cost, undo));
                self.reports.push(Report {
                    policy: i,
                    decision: Some(d),
                });
                return None;
            }
            Ok(d) => Verdict::Deny(Reports::One(Report {
                policy: i,
                decision: Some(d),
            })),
            Err(BackendError::Capacity(_)) => Verdict::Deny(Reports::One(Report {
                policy: i,
                decision: None,
            })),
            Err(e) => Verdict::Failed(i, e),
        };
        self.release();
        Some(end)
    }
}

/// Decides one request. With `at_once`, every backend answers without waiting and the
/// future completes on its first poll.
pub(crate) async fn decide(policies: &[Policy], parts: &Parts, at_once: bool) -> Verdict {
    let mut admitted = Admissions {
        policies,
        parts,
        taken: Vec::new(),
        reports: Vec::with_capacity(policies.len()),
    };
    let mut budgets = Admitted::default();

    // Budget policies first: they take nothing, so one that refuses ends the request
    // before any other policy has taken anything.
    for (i, p) in policies.iter().enumerate().filter(|(_, p)| !p.shadow) {
        let Some(side) = &p.budget else { continue };
        match peek_budget(p, side, parts, at_once).await {
            Budgeted::Admit {
                decision,
                left,
                bound,
            } => {
                admitted.reports.push(Report {
                    policy: i,
                    decision: Some(decision),
                });
                budgets.push(bound, Some(left));
            }
            Budgeted::Deny(decision) => {
                return Verdict::Deny(Reports::One(Report {
                    policy: i,
                    decision,
                }))
            }
            Budgeted::Failed(e) => return Verdict::Failed(i, e),
            Budgeted::NoKey => {
                if let Some(end) = missing(p, i) {
                    return end;
                }
            }
        }
    }

    // The policies that take what a request costs when it is admitted.
    let taking = |p: &&Policy| !p.shadow && p.budget.is_none();
    let enforced = policies.iter().filter(taking).count();
    // Policies already decided (in the peek phase).
    let mut settled = vec![false; policies.len()];

    if enforced > 1 {
        // Peek every enforced policy first: one that cannot admit denies the request
        // before any other consumes. A policy whose state changes between this peek and
        // the acquire below can still deny after others consumed; those are released.
        for (i, p) in policies.iter().enumerate().filter(|(_, p)| taking(p)) {
            let cost = p.cost_of(parts);
            let Some(peek) = p.backend.peek(parts) else {
                settled[i] = true;
                // Nothing has been taken yet: the peek phase consumes nothing.
                if let Some(end) = missing(p, i) {
                    return end;
                }
                continue;
            };
            match get(peek, at_once).await {
                Err(e) => return Verdict::Failed(i, e),
                Ok(d) if d.remaining() >= cost => {}
                Ok(_) => {
                    // Ask for real: the backend's denial is exact and consumes nothing.
                    let Some((acq, undo)) = p.backend.acquire_undoable(parts, cost) else {
                        continue;
                    };
                    let answer = get(acq, at_once).await;
                    if let Some(end) = admitted.settle(answer, i, cost, undo) {
                        return end;
                    }
                    // Capacity came back since the peek: keep it.
                    settled[i] = true;
                }
            }
        }
    }

    for (i, p) in policies.iter().enumerate().filter(|(_, p)| taking(p)) {
        if settled[i] {
            continue;
        }
        let cost = p.cost_of(parts);
        let Some((acq, undo)) = p.backend.acquire_undoable(parts, cost) else {
            if let Some(end) = missing(p, i) {
                admitted.release();
                return end;
            }
            continue;
        };
        let answer = get(acq, at_once).await;
        if let Some(end) = admitted.settle(answer, i, cost, undo) {
            return end;
        }
    }

    for (i, p) in policies.iter().enumerate().filter(|(_, p)| p.shadow) {
        if let Some(side) = &p.budget {
            // Decided and reported, never enforced; charged after the response only
            // when it admitted (a request it would refuse would never have run), and
            // not a bound on the handler's `Budget::remaining`.
            match peek_budget(p, side, parts, at_once).await {
                Budgeted::Admit {
                    decision, bound, ..
                } => {
                    admitted.reports.push(Report {
                        policy: i,
                        decision: Some(decision),
                    });
                    budgets.push(bound, None);
                }
                Budgeted::Deny(decision) => admitted.reports.push(Report {
                    policy: i,
                    decision,
                }),
                Budgeted::Failed(_) => {}
                Budgeted::NoKey => shadow_missing(p, parts),
            }
            continue;
        }
        let cost = p.cost_of(parts);
        let Some(acq) = p.backend.acquire(parts, cost) else {
            shadow_missing(p, parts);
            continue;
        };
        // A shadow policy's failure never touches the request.
        if let Ok(d) = get(acq, at_once).await {
            admitted.reports.push(Report {
                policy: i,
                decision: Some(d),
            });
        }
    }
    Verdict::Pass(Reports::Many(admitted.reports), budgets)
}

/// A shadow policy never refuses a request it cannot key; under the default it says
/// why, once.
fn shadow_missing(p: &Policy, parts: &Parts) {
    p.count_missing();
    if p.missing == MissingKey::Fail {
        p.report_missing_once(&no_key_detail(p, parts));
    }
}

/// What the default [`MissingKey::Fail`] answers and reports: the policy and why its
/// key is missing.
pub(crate) fn no_key_detail(p: &Policy, parts: &Parts) -> String {
    format!(
        "rate limit {:?} cannot key this request: {}; the request is refused \
         (Policy::on_missing_key(MissingKey::Skip) lets such requests through)",
        p.name(),
        p.missing_reason(parts)
    )
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// One enforced policy (not a budget) whose backend answers at once: the common case,
/// decided with no allocation.
fn decide_one(p: &Policy, parts: &Parts) -> Verdict {
    let cost = p.cost_of(parts);
    let Some(mut acq) = p.backend.acquire(parts, cost) else {
        return missing(p, 0).unwrap_or(Verdict::Pass(Reports::None, Admitted::default()));
    };
    let result = acq.now().unwrap_or_else(|| {
        Err(BackendError::unavailable(
            "a backend whose is_async() is false returned a pending Acquire",
        ))
    });
    let report = |decision| {
        Reports::One(Report {
            policy: 0,
            decision,
        })
    };
    match result {
        Ok(d) if d.is_allowed() => Verdict::Pass(report(Some(d)), Admitted::default()),
        Ok(d) => Verdict::Deny(report(Some(d))),
        Err(BackendError::Capacity(_)) => Verdict::Deny(report(None)),
        Err(e) => Verdict::Failed(0, e),
    }
}

/// Runs [`decide`] for backends that all answer at once: one poll completes it.
pub(crate) fn decide_now(policies: &[Policy], parts: &Parts) -> Verdict {
    if let [p] = policies {
        if !p.shadow && p.budget.is_none() {
            return decide_one(p, parts);
        }
    }
    static WAKER: OnceLock<Waker> = OnceLock::new();
    let waker = WAKER.get_or_init(|| Waker::from(Arc::new(Noop)));
    let mut cx = Context::from_waker(waker);
    match pin!(decide(policies, parts, true)).as_mut().poll(&mut cx) {
        Poll::Ready(v) => v,
        // Unreachable by construction: with `at_once` nothing in `decide` awaits a pending
        // future. Answer as a backend failure rather than panic.
        Poll::Pending => Verdict::Failed(
            0,
            BackendError::unavailable("rate-limit decision did not complete"),
        ),
    }
}
