-- GCRA (TokenBucket, LeakyBucket). KEYS[1]: the TAT (string, microseconds).
-- ARGV[4]: T, the emission interval (us). ARGV[5]: burst. ARGV[6]: 1 for the shaper.
-- Admitted iff max(TAT, t) + n*T - t <= burst*T; then TAT = max(TAT, t) + n*T.
-- Reply: {allowed, remaining, reset_after_us, retry_after_us, delay_us}.
local t_us = tonumber(ARGV[4])
local burst = tonumber(ARGV[5])
local shaper = ARGV[6] == '1'
local tau = burst * t_us
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
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
  if cost > 0 then
    redis.call('SET', KEYS[1], fmt(new_tat), 'PX', ttl_ms(new_tat - now))
  end
  return {1, remaining, new_tat - now, 0, delay}
end
local remaining = 0
if horizon > base then
  remaining = idiv(horizon - base, t_us)
end
return {0, remaining, base - now, new_tat - horizon, 0}
