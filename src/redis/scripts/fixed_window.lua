-- FixedWindow. key: hash {k = window index, c = count, w = P}. a1: P (us). a2: limit.
-- At most `limit` per window [k*P, (k+1)*P), windows aligned to the clock's zero.
local function fixed_window(key, now, cost, grace, a1, a2)
  local p = a1
  local limit = a2
  -- w: the period the state was written under. State of another period (set_quota
  -- changed it) counts windows that mean nothing now: the windows restart.
  local s = redis.call('HMGET', key, 'k', 'c', 'w')
  local sk = tonumber(s[1] or '0')
  local sc = tonumber(s[2] or '0')
  if s[3] and tonumber(s[3]) ~= p then
    sk, sc = 0, 0
  end
  local current = idiv(now, p)
  -- A state in a window later than the reading's was written by a newer reading (the
  -- Redis mode books no reservations, so nothing here is booked ahead: another
  -- instance's clock, or a caller's clock that stepped back). The reading is decided
  -- at the state's time, in its window with its count, as the local engine decides a
  -- reading behind an unmarked state; waits are measured from the reading.
  local k = math.max(current, sk)
  local count = 0
  if k == sk then
    count = sc
  end
  local finish = (k + 1) * p
  -- A zero-cost peek asks for nothing: always allowed, even on a count past the limit
  -- (a charge's debt, or a lowered limit), with nothing remaining.
  if cost == 0 or count + cost <= limit then
    count = count + cost
    local reset = 0
    if count > 0 then
      reset = finish - now
    end
    local write = nil
    if cost > 0 then
      write = function()
        redis.call('HSET', key, 'k', fmt(k), 'c', fmt(count), 'w', fmt(p))
        redis.call('PEXPIRE', key, ttl_ms(finish - now, grace))
      end
    end
    return {1, math.max(0, limit - count), reset, 0, 0}, write
  end
  local wait = finish - now
  -- The count may exceed the limit when a deployment lowered it under the same prefix:
  -- that is a denial with nothing remaining, never a negative count.
  return {0, math.max(0, limit - count), wait, wait, 0}, nil
end
