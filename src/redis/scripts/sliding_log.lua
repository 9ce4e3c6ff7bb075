-- SlidingLog. key: sorted set of admissions, score = time (us), member "time:seq".
-- a1: P (us). a2: limit. At most `limit` admissions in every (t - P, t].
-- Like the local ring, the set keeps every entry that a reading at or after the newest
-- admission can still see, so a stale reading decides exactly as the local engine.
local function sliding_log(key, now, cost, grace, a1, a2, _, peek)
  local p = a1
  local limit = a2
  local newest = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  local newest_ts = nil
  -- Waits are measured from the reading itself, never too early for its caller.
  local reading = now
  if #newest > 0 then
    newest_ts = tonumber(newest[2])
    -- A reading older than the newest admission is that admission's time.
    now = math.max(now, newest_ts)
    -- Entries expired at the newest admission's time can never count again (removing
    -- them changes no decision, so it is done even when nothing is admitted; not by a
    -- peek, which writes nothing: the counts below skip them all the same).
    if not peek then
      redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(newest_ts - p))
    end
  end
  -- An entry ts is active when ts + P > now.
  local active = redis.call('ZCOUNT', key, '(' .. fmt(now - p), '+inf')
  local reset = 0
  if active > 0 then
    reset = newest_ts + p - reading
  end
  if cost == 0 then
    -- More active entries than the limit when a deployment lowered it: none remaining.
    return {1, math.max(0, limit - active), reset, 0, 0}, nil
  end
  if active + cost <= limit then
    local write = function()
      -- Members are unique: the entries logged at `now` are named now:1 .. now:c (they
      -- all leave together), so the new ones continue from c.
      local c = redis.call('ZCOUNT', key, fmt(now), fmt(now))
      local args = {}
      for i = 1, cost do
        args[#args + 1] = fmt(now)
        args[#args + 1] = fmt(now) .. ':' .. fmt(c + i)
        if #args >= 2000 then
          redis.call('ZADD', key, unpack(args))
          args = {}
        end
      end
      if #args > 0 then
        redis.call('ZADD', key, unpack(args))
      end
      redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(now - p))
      redis.call('PEXPIRE', key, ttl_ms(p, grace))
    end
    return {1, limit - active - cost, now + p - reading, 0, 0}, write
  end
  -- The oldest active entry that must leave the window before `cost` more fit; the
  -- set's first (size - active) entries are inactive.
  local size = redis.call('ZCARD', key)
  local idx = (size - active) + cost - (limit - active) - 1
  local e = redis.call('ZRANGE', key, idx, idx, 'WITHSCORES')
  return {0, math.max(0, limit - active), reset, tonumber(e[2]) + p - reading, 0}, nil
end
