//! The keyed target's operations (split from keyed.rs to keep each file short).

use super::*;
use tollgate_fuzz::model::State;

impl<'l> Run<'l> {
    pub(super) fn step(&mut self, op: &Op) {
        let t = self.t;
        match *op {
            Op::Advance(s) if s.unit >= SET_FROM => {
                self.t = s.moved(t, self.m.p0().period);
                self.clock.set(Duration::from_nanos(self.t as u64));
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.trace.push(format!("t={} clock set from {t}", self.t));
            }
            Op::Advance(s) => {
                let d = s.nanos();
                self.t += d;
                self.newest = self.newest.max(self.t);
                check::behind(self.t < self.newest);
                self.clock.advance(Duration::from_nanos(d as u64));
                self.trace.push(format!("t={} advance {d}", self.t));
            }
            Op::Check(r) => self.check(r),
            Op::Peek(r) => self.peek(r),
            Op::Reserve(r, mw) => self.reserve(r, mw.nanos()),
            Op::Cancel(i) => {
                if self.held.is_empty() {
                    return;
                }
                let (res, b, key) = self.held.remove(usize::from(i) % self.held.len());
                res.cancel();
                self.trace.push(format!("t={t} cancel(key {key}, {b:?})"));
                let p = self.m.p0();
                if let Some(Some(s)) = self.m.keys.get_mut(&key) {
                    s.cancel(t, &b, &p);
                }
                self.verify(key, check::CANCEL, "peek(key) after cancel");
            }
            Op::Keep(i) => {
                if !self.held.is_empty() {
                    let (res, _, key) = self.held.remove(usize::from(i) % self.held.len());
                    drop(res);
                    self.trace
                        .push(format!("t={t} drop a reservation of key {key}"));
                }
            }
            Op::Reset(k) | Op::Remove(k) => {
                let key = u64::from(k % 10);
                let reset = matches!(op, Op::Reset(_));
                let _ = if reset {
                    self.l.reset(&key)
                } else {
                    self.l.remove(&key)
                };
                self.trace.push(format!(
                    "t={t} {}({key})",
                    if reset { "reset" } else { "remove" }
                ));
                // README: "the key's slot becomes idle and is the first reused": found
                // with a fresh state until a claim reuses it.
                self.m.maybe_gone.remove(&key);
                let f = self.m.fresh();
                self.m.keys.insert(key, Some(f));
                self.verify(key, table::RESET, "peek(key) after reset/remove");
            }
            Op::SetQuota(i, q) => {
                let (i, old) = self.tier(i);
                let period = (!self.algo.is_bucket()).then_some(old.period);
                let np = q.params(self.algo, period);
                let tier = self.l.tier(i).expect("a configured tier");
                let got = tier.set_quota(np.quota());
                self.trace
                    .push(format!("t={t} tier({i}).set_quota({np:?}) -> {got:?}"));
                if self.algo == Algo::Log && got.is_err() {
                    return; // MODEL CHOICE: the ring's size for tiers is not stated.
                }
                let quote = if self.algo.is_bucket() {
                    check::SET_QUOTA_BUCKET
                } else {
                    check::SET_QUOTA_WINDOW
                };
                promise(
                    got.is_ok(),
                    quote,
                    format_args!("tier({i}).set_quota({np:?}) gave {got:?}"),
                    &self.trace,
                );
                // guide: "a bucket's debt at the change `c` is converted into the new quota's
                // requests, `TAT' = c + ⌈(TAT − c)·T_new / T_old⌉`": every state the retired
                // rate wrote is converted at the change (a rate another tier still uses stays).
                let retired = !self
                    .m
                    .tiers
                    .iter()
                    .enumerate()
                    .any(|(j, q)| j != i && q.t() == old.t());
                if self.algo.is_bucket() && old.t() != np.t() && retired {
                    for s in self.m.keys.values_mut().flatten() {
                        if matches!(&s.s, State::Gcra(g) if g.wt == old.t()) {
                            s.convert(t, &np);
                        }
                    }
                }
                self.m.tiers[i] = np;
            }
            Op::CheckAll(r, wall_first) => self.check_all(r, wall_first),
        }
    }

    /// A peek on `key` after an operation that must have left its state as the model says.
    fn verify(&mut self, key: u64, ctx: &str, what: &str) {
        let t = self.t;
        let p = self.m.p0();
        if self.m.is_new(key, t) && self.m.active(t).len() >= self.m.max_keys {
            return; // a peek of a new key in a full table: not stated
        }
        if matches!(self.m.keys.get(&key), Some(None)) {
            return;
        }
        let mut cands = self.m.candidates(key, t);
        if cands.is_empty() {
            cands = self.m.keys[&key].iter().cloned().collect();
        }
        let Ok(d) = self.l.peek_n(&key, 1) else {
            return;
        };
        let es: Vec<Expect> = cands.iter().filter_map(|s| s.decide(t, 1, &p)).collect();
        if es.iter().any(|e| same(&d, e)) {
            return;
        }
        let floor = self.m.floor;
        if cands.len() > 1 || self.m.is_new(key, t) {
            let from_floor = Lim::new(self.algo)
                .decide(floor, 1, &p)
                .is_some_and(|e| same(&d, &e));
            promise(
                !(t < floor && from_floor),
                table::FLOOR,
                format_args!("{what}: key {key}, missing, was answered with its waits measured from the floor {floor}, not from the reading {t}"),
                &self.trace,
            );
        }
        if let Some(e) = es.last() {
            decision(self.algo, Some(ctx), what, &d, e, &self.trace);
        }
    }

    fn check(&mut self, r: Req) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        if n > p.cap() {
            let got = self.l.tier(i).expect("tier").check_n(&key, n);
            self.trace
                .push(format!("t={t} tier({i}).check_n({key}, {n}) -> {got:?}"));
            return promise(
                got.is_err(),
                check::CANNOT_FIT,
                format_args!("check_n({n}) above the cap gave {got:?}"),
                &self.trace,
            );
        }
        let (got, fate, own, soonest) =
            self.keyed(key, |s| s.l.tier(i).expect("tier").check_n(&key, n));
        self.trace.push(format!(
            "t={t} tier({i}).check_n({key}, {n}) -> {:?} {fate:?}",
            got.map(|d| d.is_allowed())
        ));
        let d = match got {
            Ok(d) => d,
            Err(e) => {
                return promise(
                    false,
                    check::CANNOT_FIT,
                    format_args!("check_n({n}) gave {e:?}"),
                    &self.trace,
                )
            }
        };
        self.fated(&fate, &d, soonest, &p);
        if !own {
            return;
        }
        let cands = self.m.candidates(key, t);
        if cands.is_empty() {
            if let Some(s) = self.m.state_for(key, t) {
                let e = s.check(t, n, &p).expect("fits");
                decision(self.algo, None, "check_n(key)", &d, &e, &self.trace);
            }
            return;
        }
        let run = |s: &mut Lim, at: u128| s.check(at, n, &p).expect("fits");
        let ctx = (t < self.m.floor).then_some(table::FLOOR);
        if let Some((s, e)) = self.resolve(key, cands, run, |e| same(&d, e)) {
            decision(self.algo, ctx, "check_n(key)", &d, &e, &self.trace);
            self.m.keys.insert(key, Some(s));
        }
    }

    /// A refused or untracked request's decision.
    fn fated(&self, fate: &Fate, d: &Decision, soonest: Option<u128>, p: &Params) {
        match fate {
            Fate::Refused => {
                let ra = d.retry_after().map(|r| r.as_nanos());
                promise(
                    !d.is_allowed() && (self.m.any_unknown() || ra == soonest),
                    table::REFUSED,
                    format_args!(
                        "refused with {d:?}, the soonest active entry frees up in {soonest:?} ns"
                    ),
                    &self.trace,
                );
                promise(d.limit() == p.limit && d.burst() == p.burst, "guide::promises (refusal-tier): \"A refusal by a full table reports the deciding tier's limit and burst.\"", format_args!("{d:?} under {p:?}"), &self.trace);
            }
            Fate::Untracked => promise(
                d.is_allowed(),
                table::UNTRACKED,
                format_args!("{d:?}"),
                &self.trace,
            ),
            _ => {}
        }
    }

    fn peek(&mut self, r: Req) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = u32::from(r.n % 10);
        let got = self.l.tier(i).expect("tier").peek_n(&key, n);
        self.trace.push(format!(
            "t={t} tier({i}).peek_n({key}, {n}) -> {:?}",
            got.map(|d| (d.is_allowed(), d.remaining()))
        ));
        let new = self.m.may_claim(key, t);
        if new && self.m.active(t).len() >= self.m.max_keys {
            return; // what a peek of a new key in a full table answers is not stated
        }
        let peek_quote = if new && t < self.m.floor {
            table::FLOOR
        } else {
            check::PEEK
        };
        let e = match self.m.keys.get(&key) {
            Some(None) => return,
            Some(Some(s)) if !new => s.decide(t, n, &p),
            _ => {
                // A new key: any of its candidate states may answer.
                let es: Vec<Option<Expect>> = self
                    .m
                    .candidates(key, t)
                    .iter()
                    .map(|s| s.decide(t, n, &p))
                    .collect();
                let hit = got.as_ref().ok().and_then(|d| {
                    es.iter().flatten().find(|e| {
                        if n == 0 {
                            e.remaining == d.remaining()
                                && e.reset_after == d.reset_after().as_nanos()
                        } else {
                            same(d, e)
                        }
                    })
                });
                hit.copied().or(es.last().copied().flatten())
            }
        };
        match (e, got) {
            (Some(e), Ok(d)) if n == 0 => {
                let what = format!(
                    "peek_n(key, 0): (remaining, reset_after) {:?}, model {:?}",
                    (d.remaining(), d.reset_after().as_nanos()),
                    (e.remaining, e.reset_after)
                );
                promise(
                    d.remaining() == e.remaining,
                    check::REMAINING,
                    format_args!("{what}"),
                    &self.trace,
                );
                promise(
                    d.reset_after().as_nanos() == e.reset_after,
                    check::RESET,
                    format_args!("{what}"),
                    &self.trace,
                );
            }
            (Some(e), Ok(d)) => decision(
                self.algo,
                Some(peek_quote),
                "peek_n(key)",
                &d,
                &e,
                &self.trace,
            ),
            (e, d) => promise(
                e.is_none() && d.is_err(),
                check::CANNOT_FIT,
                format_args!("peek_n({n}) gave {d:?}"),
                &self.trace,
            ),
        }
    }

    fn reserve(&mut self, r: Req, mw: u128) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        if n > p.cap() {
            let got =
                self.l
                    .tier(i)
                    .expect("tier")
                    .reserve(&key, n, Duration::from_nanos(mw as u64));
            return promise(
                matches!(got, Err(ReserveError::InsufficientCapacity(_))),
                check::CANNOT_FIT,
                format_args!(
                    "reserve({n}) above the cap gave {:?}",
                    got.map(|r| r.wait_time())
                ),
                &self.trace,
            );
        }
        let l = self.l;
        let (got, fate, own, soonest) = self.keyed(key, |_| {
            l.tier(i)
                .expect("tier")
                .reserve(&key, n, Duration::from_nanos(mw as u64))
        });
        self.trace.push(format!(
            "t={t} tier({i}).reserve({key}, {n}, {mw}) -> {:?} {fate:?}",
            got.as_ref().map(|r| r.wait_time().as_nanos())
        ));
        match fate {
            Fate::Refused => {
                let ok = matches!(got, Err(ReserveError::Refused { retry_after }) if self.m.any_unknown() || Some(retry_after.as_nanos()) == soonest);
                return promise(
                    ok,
                    table::REFUSED,
                    format_args!(
                        "reserve gave {:?}; soonest {soonest:?}",
                        got.map(|r| r.wait_time())
                    ),
                    &self.trace,
                );
            }
            Fate::Untracked => {
                return promise(
                    got.as_ref().is_ok_and(|r| r.wait_time().is_zero()),
                    table::UNTRACKED,
                    format_args!("reserve gave {:?}", got.map(|r| r.wait_time())),
                    &self.trace,
                );
            }
            _ => {}
        }
        if !own {
            return;
        }
        let cands = self.m.candidates(key, t);
        let below = !cands.is_empty() && t < self.m.floor;
        let reserve_quote = if below { table::FLOOR } else { check::RESERVE };
        let e = if cands.is_empty() {
            let Some(s) = self.m.state_for(key, t) else {
                return;
            };
            s.reserve(t, n, mw, &p)
        } else {
            let got_wait = got.as_ref().map(|r| r.wait_time().as_nanos());
            let fits = |e: &Reserved| match (e, &got_wait) {
                (Reserved::Ok { wait, .. }, Ok(w)) => wait == w,
                (Reserved::TooLong { .. }, Err(_)) => true,
                _ => false,
            };
            match self.resolve(key, cands, |s, at| s.reserve(at, n, mw, &p), fits) {
                Some((s, e)) => {
                    self.m.keys.insert(key, Some(s));
                    e
                }
                None => return,
            }
        };
        match (e, got) {
            (Reserved::Ok { wait, booking }, Ok(res)) => {
                promise(
                    res.wait_time().as_nanos() == wait,
                    reserve_quote,
                    format_args!(
                        "wait_time {:?}, the model books at {wait} ns",
                        res.wait_time()
                    ),
                    &self.trace,
                );
                self.held.push((res, booking, key));
            }
            (Reserved::TooLong { wait }, Err(ReserveError::TooLong { wait: w, max_wait })) => {
                promise(
                    w.as_nanos() == wait,
                    reserve_quote,
                    format_args!("TooLong wait {w:?}, the model's {wait} ns"),
                    &self.trace,
                );
                promise(
                    w > max_wait,
                    check::TOO_LONG,
                    format_args!("TooLong {{ wait: {w:?}, max_wait: {max_wait:?} }}"),
                    &self.trace,
                );
            }
            (e, got) => promise(
                false,
                reserve_quote,
                format_args!(
                    "reserve gave {:?}, the model {e:?}",
                    got.map(|r| r.wait_time())
                ),
                &self.trace,
            ),
        }
    }

    fn check_all(&mut self, r: Req, wall_first: bool) {
        let t = self.t;
        let key = u64::from(r.key % 10);
        let (i, p) = self.tier(r.tier);
        let n = 1 + u32::from(r.n % 9);
        while self.wall.peek().is_allowed() {
            let _ = self.wall.check();
        }
        let (l, wall) = (self.l, self.wall);
        let run = |_: &Self| {
            let kl = l.tier(i).expect("tier").limit(&key);
            let limits: [&dyn Limit; 2] = if wall_first { [wall, &kl] } else { [&kl, wall] };
            check_all(&limits, n)
        };
        if n > p.cap() {
            let got = run(self);
            return promise(
                got.is_err(),
                check::CANNOT_FIT,
                format_args!("check_all({n}) above the cap gave {got:?}"),
                &self.trace,
            );
        }
        // guide: "Leaky buckets are booked after every other limit": a leaky key
        // behind the spent wall (a token bucket) is only peeked, whatever the order.
        let (got, fate, own, _) = if wall_first || self.algo == Algo::Leaky {
            (run(self), Fate::Normal, false, None)
        } else {
            self.keyed(key, run)
        };
        self.trace.push(format!(
            "t={t} check_all([{}], {n}) (tier {i}) -> {:?} {fate:?}",
            if wall_first {
                format!("wall, key {key}")
            } else {
                format!("key {key}, wall")
            },
            got.as_ref().map(|d| d.denied().collect::<Vec<_>>())
        ));
        let md = match got {
            Ok(md) => md,
            Err(e) => {
                return promise(
                    false,
                    check::CANNOT_FIT,
                    format_args!("check_all gave {e:?}"),
                    &self.trace,
                )
            }
        };
        promise(
            !md.is_allowed(),
            check::DENIAL_NOTHING,
            format_args!("check_all with a spent wall was admitted"),
            &self.trace,
        );
        if own && matches!(fate, Fate::Normal | Fate::Evicted) {
            // MODEL CHOICE: the booking's conversion to the tier's rate stays; nothing else.
            // A new key read behind the floor: found idle or missing, the model cannot
            // tell which state the roll-back left (an eviction says: missing, the last).
            let mut cands = self.m.candidates(key, t);
            if fate == Fate::Evicted && cands.len() > 1 {
                cands.drain(..cands.len() - 1);
            }
            if cands.len() > 1 {
                self.m.keys.insert(key, None);
                self.m.maybe_gone.remove(&key);
            } else if let Some(s) = {
                if let Some(c) = cands.pop() {
                    self.m.keys.insert(key, Some(c));
                }
                self.m.state_for(key, t)
            } {
                s.convert(t, &p);
                // Booked, then rolled back when the wall denied: the state the booking's
                // decision wrote, nothing taken.
                if s.decide(t, n, &p).is_some_and(|e| e.allowed) {
                    s.touch(t, &p);
                }
            }
        }
        self.verify(
            key,
            check::DENIAL_NOTHING,
            "peek(key) after a denied check_all",
        );
    }
}
