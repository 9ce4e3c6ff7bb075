-- SlidingLog. KEYS[1]: sorted set of admissions, score = time (us), member "time:seq".
-- ARGV[4]: P (us). ARGV[5]: limit. At most `limit` admissions in every (t - P, t].
local p = tonumber(ARGV[4])
local limit = tonumber(ARGV[5])
local newest = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local newest_ts = nil
if #newest > 0 then
  newest_ts = tonumber(newest[2])
  -- A reading older than the newest admission is that admission's time.
  now = math.max(now, newest_ts)
end
-- An entry ts has expired when ts + P <= now.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', fmt(now - p))
local active = redis.call('ZCARD', KEYS[1])
local reset = 0
if active > 0 then
  reset = newest_ts + p - now
end
if cost == 0 then
  return {1, limit - active, reset, 0, 0}
end
if active + cost <= limit then
  -- Members are unique: at a fixed time the active count only grows.
  local args = {}
  for i = 1, cost do
    args[#args + 1] = fmt(now)
    args[#args + 1] = fmt(now) .. ':' .. fmt(active + i)
    if #args >= 2000 then
      redis.call('ZADD', KEYS[1], unpack(args))
      args = {}
    end
  end
  if #args > 0 then
    redis.call('ZADD', KEYS[1], unpack(args))
  end
  redis.call('PEXPIRE', KEYS[1], ttl_ms(p))
  return {1, limit - active - cost, p, 0, 0}
end
-- The oldest entry that must leave the window before `cost` more fit.
local idx = cost - (limit - active) - 1
local e = redis.call('ZRANGE', KEYS[1], idx, idx, 'WITHSCORES')
return {0, limit - active, reset, tonumber(e[2]) + p - now, 0}
