-- GCRA (TokenBucket, LeakyBucket). key: the TAT (string, microseconds).
-- a1: T, the emission interval (us). a2: burst. a3: 1 for the shaper.
-- Admitted iff max(TAT, t) + n*T - t <= burst*T; then TAT = max(TAT, t) + n*T.
local function gcra(key, now, cost, grace, a1, a2, a3)
  local t_us = a1
  local burst = a2
  local shaper = a3 == 1
  local tau = burst * t_us
  local tat = tonumber(redis.call('GET', key) or '0')
  local base = math.max(tat, now)
  local new_tat = base + cost * t_us
  local horizon = now + tau
  -- A zero-cost peek asks for nothing: always allowed (only a stale reading can put
  -- TAT past now + tau; the peek then reports no capacity left).
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
        redis.call('SET', key, fmt(new_tat), 'PX', ttl_ms(new_tat - now, grace))
      end
    end
    return {1, remaining, new_tat - now, 0, delay}, write
  end
  local remaining = 0
  if horizon > base then
    remaining = idiv(horizon - base, t_us)
  end
  return {0, remaining, base - now, new_tat - horizon, 0}, nil
end
