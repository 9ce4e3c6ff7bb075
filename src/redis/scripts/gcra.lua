-- GCRA (TokenBucket, LeakyBucket). key: "<TAT> <T>" (a string: the theoretical
-- arrival time and the emission interval that wrote it, both in us), or a bare "<TAT>"
-- written by a version that did not record its interval (read as written under T).
-- a1: T, the emission interval (us). a2: burst. a3: 1 for the shaper.
-- Admitted iff max(TAT, t) + n*T - t <= burst*T; then TAT = max(TAT, t) + n*T.
-- State written under another interval T_a (set_quota changed it) carries over in
-- requests: TAT' = t + ceil((TAT - t) * T / T_a) when TAT > t, and is stored with T by
-- the next request that asks for something (an admission, or a denial: from then on the
-- debt is paid off at the new rate, as the in-process engine does).

-- The largest span (us) the client accepts (MAX_SPAN_US): an emission interval read
-- from Redis past it is not ours.
local GCRA_MAX_SPAN = 2 ^ 50

-- ceil(a * b / c) for integers 0 <= a < 2^53 and 0 < b, c <= 2^50, or `cap`
-- (<= 2^51) when that is smaller. a * b may be far past 2^53, where doubles stop being
-- exact, so the product is built bit by bit of b as a * b = q * c + r, 0 <= r < c
-- (Horner's scheme, reduced modulo c at every step): r stays below 2^51 and q below
-- 3 * 2^51 (the loop stops once q reaches cap).
local function mul_div_ceil(a, b, c, cap)
  local qa = idiv(a, c)
  local ra = a - qa * c
  if qa >= cap then
    return cap
  end
  local bits = {}
  while b > 0 do
    local half = math.floor(b / 2)
    bits[#bits + 1] = b - 2 * half
    b = half
  end
  local q, r = 0, 0
  for i = #bits, 1, -1 do
    q, r = 2 * q, 2 * r
    if r >= c then
      q, r = q + 1, r - c
    end
    if bits[i] == 1 then
      q, r = q + qa, r + ra
      if r >= c then
        q, r = q + 1, r - c
      end
    end
    if q >= cap then
      return cap
    end
  end
  if r > 0 then
    q = q + 1
  end
  return math.min(q, cap)
end

-- The key's TAT as a state of interval t_us at `now`: converted in requests when it
-- was written under another interval (then also `true`). Raises an error (reported to
-- the client as foreign state) for a value this script did not write.
local function gcra_tat(key, now, t_us, tau)
  local v = redis.call('GET', key)
  if not v then
    return 0, false
  end
  local tat, from = string.match(v, '^(%d+) (%d+)$')
  if tat then
    tat, from = tonumber(tat), tonumber(from)
  else
    tat = tonumber(string.match(v, '^(%d+)$'))
    from = t_us
  end
  if not tat or from < 1 or from > GCRA_MAX_SPAN then
    error('tollgate: ' .. key .. ' holds ' .. v .. ', not a bucket state "<TAT> <T>"')
  end
  if tat <= now or from == t_us then
    return tat, false
  end
  -- A debt past what any wait can be is capped (a time plus two spans at most, as
  -- the prelude requires): tau + 2^50 us of the new interval.
  return now + mul_div_ceil(tat - now, t_us, from, tau + GCRA_MAX_SPAN), true
end

local function gcra(key, now, cost, grace, a1, a2, a3, peek)
  local t_us = a1
  local burst = a2
  local shaper = a3 == 1
  local tau = burst * t_us
  local tat, converted = gcra_tat(key, now, t_us, tau)
  local base = math.max(tat, now)
  local new_tat = base + cost * t_us
  local horizon = now + tau
  -- A zero-cost peek asks for nothing: always allowed (only a stale reading can put
  -- TAT past now + tau; the peek then reports no capacity left). It converts for its
  -- answer and writes nothing.
  if cost == 0 or new_tat <= horizon then
    local remaining = 0
    if horizon > new_tat then
      remaining = idiv(horizon - new_tat, t_us)
    end
    local delay = 0
    if shaper then
      delay = base - now
    end
    local write = nil
    if cost > 0 then
      write = function()
        redis.call('SET', key, fmt(new_tat) .. ' ' .. fmt(t_us), 'PX',
          ttl_ms(new_tat - now, grace))
      end
    end
    return {1, remaining, new_tat - now, 0, delay}, write
  end
  local remaining = 0
  if horizon > base then
    remaining = idiv(horizon - base, t_us)
  end
  -- A denial under a new interval stores the conversion (it takes nothing: the same
  -- debt, counted in the new quota's requests), so that a key retrying after a lowered
  -- limit pays it off at the new rate. A peek stores nothing.
  if converted and not peek then
    redis.call('SET', key, fmt(tat) .. ' ' .. fmt(t_us), 'PX', ttl_ms(tat - now, grace))
  end
  return {0, remaining, base - now, new_tat - horizon, 0}, nil
end
