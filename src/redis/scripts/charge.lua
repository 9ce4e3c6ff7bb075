-- Charges and give-backs (token budgets: check before, charge after), one limit, one
-- atomic call, on the state the decision scripts write (same key layout, same TTL
-- rules: a charged key lives until its debt is paid). Appended to the prelude and all
-- four algorithms (their decision functions report the state after the call).
--
-- KEYS[1]: the limit's key. ARGV[1]: the caller's time in microseconds, or -1 for Redis
-- TIME. ARGV[2]: n. ARGV[3]: extra TTL in milliseconds (caller-clock grace). ARGV[4..6]:
-- the algorithm's parameters, as single.lua. ARGV[7]: the algorithm (1 GCRA, 2 fixed
-- window, 3 sliding window, 4 sliding log). ARGV[8]: 1 charge, 2 give back. ARGV[9]: a
-- charge's bound, computed by the client: GCRA, the most debt past the burst in us
-- (max_owed * T, at most 2^50); a window, the most its count may reach (limit + max_owed,
-- at most what the local engine's count field holds, and for the sliding window at most
-- 2^52 / P, so that every count times P, and the sum of two, stays exact); the log,
-- unused.
--
-- Reply: {allowed, remaining, reset_after_us, retry_after_us, delay_us, taken, owed,
-- dropped, given}: the decision a request of cost 1 would get right after the call
-- (decided by the algorithm's own function, its write not made), then what the charge
-- counted (taken + dropped = n; owed: how far past the quota the key is after it, at
-- most 2^32 - 1) or what the give-back gave.
--
-- Every number stays below 2^53: n <= 2^32, counts below 2^33 (the log's below 2^17), and
-- a bucket's TAT at most now + tau + 2^50 (the largest state the decision script's sums
-- already allow).

-- ceil(a / b) for integers 0 <= a, 0 < b.
local function cdiv(a, b)
  return idiv(a + b - 1, b)
end

-- GCRA. TAT' = max(TAT, now) + taken*T, with TAT' <= now + tau + debt; owed =
-- ceil((TAT' - now - tau) / T).
local function gcra_charge(key, now, n, grace, t_us, burst, _, debt)
  local tau = burst * t_us
  local tat, converted = gcra_tat(key, now, t_us, tau)
  local base = math.max(tat, now)
  local full = now + tau
  local room = 0
  if full + debt > base then
    room = idiv(full + debt - base, t_us)
  end
  local taken = math.min(n, room)
  local new_tat = base + taken * t_us
  local owed = 0
  if new_tat > full then
    owed = cdiv(new_tat - full, t_us)
  end
  -- A charge that took nothing still stores a conversion to this interval, as a
  -- denial does (the same debt, counted in this quota's requests).
  if taken > 0 or (converted and n > 0) then
    redis.call('SET', key, fmt(new_tat) .. ' ' .. fmt(t_us), 'PX',
      ttl_ms(new_tat - now, grace))
  end
  return taken, owed, n - taken
end

-- GCRA: min(n, ceil((TAT - now) / T)) requests off TAT, never below now.
local function gcra_give_back(key, now, n, grace, t_us, burst)
  local tau = burst * t_us
  local tat = gcra_tat(key, now, t_us, tau)
  if tat <= now then
    return 0
  end
  local given = math.min(n, cdiv(tat - now, t_us))
  local next_tat = math.max(tat - given * t_us, now)
  if next_tat > now or grace > 0 then
    redis.call('SET', key, fmt(next_tat) .. ' ' .. fmt(t_us), 'PX',
      ttl_ms(next_tat - now, grace))
  else
    -- A full bucket at the reading decides as a missing key (and PX 0 is refused).
    redis.call('DEL', key)
  end
  return given
end

-- FixedWindow: the current window's count (or the state's later window's) may pass
-- the limit, up to `cap`; the rest of the window denies.
local function fixed_window_charge(key, now, n, grace, p, limit, _, cap)
  local s = redis.call('HMGET', key, 'k', 'c', 'w')
  local sk = tonumber(s[1] or '0')
  local sc = tonumber(s[2] or '0')
  if s[3] and tonumber(s[3]) ~= p then
    sk, sc = 0, 0
  end
  local current = idiv(now, p)
  local k, count = current, 0
  if sk >= current then
    k, count = sk, sc
  end
  local taken = math.min(n, math.max(0, cap - count))
  local after = count + taken
  if taken > 0 then
    redis.call('HSET', key, 'k', fmt(k), 'c', fmt(after), 'w', fmt(p))
    redis.call('PEXPIRE', key, ttl_ms((k + 1) * p - now, grace))
  end
  return taken, math.max(0, after - limit), n - taken
end

-- FixedWindow: from the state's own count while its window is not over.
local function fixed_window_give_back(key, now, n, _, p)
  local s = redis.call('HMGET', key, 'k', 'c', 'w')
  if not s[1] or (s[3] and tonumber(s[3]) ~= p) then
    return 0
  end
  local sk, sc = tonumber(s[1]), tonumber(s[2] or '0')
  if sk < idiv(now, p) then
    return 0
  end
  local given = math.min(n, sc)
  if given > 0 then
    -- The key keeps its TTL: the window ends when it did.
    redis.call('HSET', key, 'c', fmt(sc - given))
  end
  return given
end

-- SlidingWindow: the weighted count may pass the limit, up to `cap`:
-- prev*(P - e) + curr*P <= cap*P (the bound is on what `owed` measures); owed =
-- ceil((prev*(P - e) + curr*P - limit*P) / P).
local function sliding_window_charge(key, now, n, grace, p, limit, _, cap)
  local s = redis.call('HMGET', key, 'k', 'p', 'c', 'w')
  local sk = tonumber(s[1] or '0')
  local sp = tonumber(s[2] or '0')
  local sc = tonumber(s[3] or '0')
  if s[4] and tonumber(s[4]) ~= p then
    sk, sp, sc = 0, 0, 0
  end
  local current = idiv(now, p)
  local k, e, prev, curr
  if current < sk then
    k, e, prev, curr = sk, 0, sp, sc
  else
    k, e = current, now - current * p
    local d = current - sk
    if d == 0 then
      prev, curr = sp, sc
    elseif d == 1 then
      prev, curr = sc, 0
    else
      prev, curr = 0, 0
    end
  end
  -- prev, cap <= 2^52 / P: each product at most 2^52, their difference exact.
  local weighs = prev * (p - e)
  local room = 0
  if cap * p > weighs then
    room = idiv(cap * p - weighs, p)
  end
  local taken = math.min(n, math.max(0, room - curr))
  local after = curr + taken
  -- prev, after <= cap <= 2^52 / P: each product at most 2^52, their sum below 2^53.
  local over = prev * (p - e) + (after - limit) * p
  local owed = 0
  if over > 0 then
    owed = cdiv(over, p)
  end
  if taken > 0 then
    redis.call('HSET', key, 'k', fmt(k), 'p', fmt(prev), 'c', fmt(after), 'w', fmt(p))
    redis.call('PEXPIRE', key, ttl_ms((k + 2) * p - now, grace))
  end
  return taken, owed, n - taken
end

-- SlidingWindow: from the counts that still weigh at the reading, the current window's
-- first, then the previous one's (the state rolled to the reading's window, as a
-- decision rolls it; its TTL already covers what is left).
local function sliding_window_give_back(key, now, n, _, p)
  local s = redis.call('HMGET', key, 'k', 'p', 'c', 'w')
  if not s[1] or (s[4] and tonumber(s[4]) ~= p) then
    return 0
  end
  local sk = tonumber(s[1])
  local sp = tonumber(s[2] or '0')
  local sc = tonumber(s[3] or '0')
  local k, prev, curr = math.max(idiv(now, p), sk), 0, 0
  if k == sk then
    prev, curr = sp, sc
  elseif k == sk + 1 then
    prev = sc
  end
  local from_curr = math.min(n, curr)
  local from_prev = math.min(n - from_curr, prev)
  local given = from_curr + from_prev
  if given > 0 then
    redis.call('HSET', key, 'k', fmt(k), 'p', fmt(prev - from_prev), 'c',
      fmt(curr - from_curr), 'w', fmt(p))
  end
  return given
end

-- The log's entries at time t become `want`, named t:1 .. t:want as sliding_log.lua
-- names them (the entries of one time are always t:1 .. t:count).
local function log_resize(key, t, want)
  local have = redis.call('ZCOUNT', key, fmt(t), fmt(t))
  local args = {}
  local function flush(cmd)
    if #args > 0 then
      redis.call(cmd, key, unpack(args))
      args = {}
    end
  end
  for i = have + 1, want do
    args[#args + 1] = fmt(t)
    args[#args + 1] = fmt(t) .. ':' .. fmt(i)
    if #args >= 2000 then
      flush('ZADD')
    end
  end
  flush('ZADD')
  for i = want + 1, have do
    args[#args + 1] = fmt(t) .. ':' .. fmt(i)
    if #args >= 2000 then
      flush('ZREM')
    end
  end
  flush('ZREM')
end

-- The log's newest entry's time, or nil; drops what can never count again (as
-- sliding_log.lua does at every reading).
local function log_newest(key, p)
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if #newest == 0 then
    return nil
  end
  local ts = tonumber(newest[2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(ts - p))
  return ts
end

-- The log's active entries at `at` among its newest `limit` (all the local ring holds).
local function log_active(key, at, p, limit)
  return math.min(limit, redis.call('ZCOUNT', key, '(' .. fmt(at - p), '+inf'))
end

-- SlidingLog: min(n, limit) entries logged at the reading (or at the newest entry, if
-- later), whatever is left; owed = active + n - limit (how far this charge went past
-- what was left). A charge of 0 writes nothing. The set then keeps its newest
-- `limit` entries, as the local ring holds them (no other entry decides anything).
local function sliding_log_charge(key, now, n, grace, p, limit)
  local reading = now
  local at = now
  local newest = log_newest(key, p)
  if newest then
    at = math.max(now, newest)
  end
  local active = log_active(key, at, p, limit)
  local logged = math.min(n, limit)
  if logged > 0 then
    log_resize(key, at, redis.call('ZCOUNT', key, fmt(at), fmt(at)) + logged)
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(at - p))
    local size = redis.call('ZCARD', key)
    if size > limit then
      -- The oldest entry kept, and every older one out.
      local keep = tonumber(redis.call('ZRANGE', key, size - limit, size - limit,
        'WITHSCORES')[2])
      redis.call('ZREMRANGEBYSCORE', key, '-inf', '(' .. fmt(keep))
      size = redis.call('ZCARD', key)
      local at_keep = redis.call('ZCOUNT', key, fmt(keep), fmt(keep))
      log_resize(key, keep, at_keep - (size - limit))
    end
    redis.call('PEXPIRE', key, ttl_ms(at + p - reading, grace))
  end
  return n, math.max(0, active + n - limit), 0
end

-- SlidingLog: the newest active entries leave the log, exactly, while some of its
-- newest `limit` entries (all the local ring holds) are out of the period or missing;
-- when all of those are in it, the log may hold an overdraft it could not count (a
-- charge past the limit) and gives nothing back, as the local ring. This mode books
-- nothing ahead, so an entry later than the reading is no pending booking but a reading
-- behind the newest entry (the caller's clock stepped back): counted at the newest
-- entry's time, as every decision is.
local function sliding_log_give_back(key, now, n, _, p, limit)
  local newest = log_newest(key, p)
  if not newest then
    return 0
  end
  local active = log_active(key, math.max(now, newest), p, limit)
  if active >= limit then
    return 0
  end
  local given = math.min(n, active)
  -- Out with the newest `given`, one time at a time.
  local left = given
  while left > 0 do
    local t = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
    local at_t = redis.call('ZCOUNT', key, fmt(t), fmt(t))
    local out = math.min(left, at_t)
    log_resize(key, t, at_t - out)
    left = left - out
  end
  return given
end

local charges = {
  {gcra, gcra_charge, gcra_give_back},
  {fixed_window, fixed_window_charge, fixed_window_give_back},
  {sliding_window, sliding_window_charge, sliding_window_give_back},
  {sliding_log, sliding_log_charge, sliding_log_give_back},
}

local function account()
  local now = tonumber(ARGV[1])
  if now < 0 then
    now = redis_now()
  end
  local n, grace = tonumber(ARGV[2]), tonumber(ARGV[3])
  local a1, a2, a3 = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
  local alg = charges[tonumber(ARGV[7])]
  local taken, owed, dropped, given = 0, 0, 0, 0
  if ARGV[8] == '1' then
    taken, owed, dropped = alg[2](KEYS[1], now, n, grace, a1, a2, a3, tonumber(ARGV[9]))
    -- The one place `owed` saturates: the client reads it as a u32, and a key can owe
    -- more (a bucket's debt of up to 2^50 us, past the burst a lower quota or an older
    -- reading left; a sliding window's weighted count), which in-process reads
    -- u32::MAX too. Every other count of the reply is at most n.
    owed = math.min(owed, 4294967295)
  else
    given = alg[3](KEYS[1], now, n, grace, a1, a2, a3)
  end
  -- The state after it, as a request of cost 1 would be decided (its write not made).
  local reply = alg[1](KEYS[1], now, 1, grace, a1, a2, a3)
  return {reply[1], reply[2], reply[3], reply[4], reply[5], taken, owed, dropped, given}
end

return account()
