-- SlidingWindow. key: hash {k = window index, p = count of k-1, c = count of k, w = P}.
-- a1: P (us). a2: limit (limit * P < 2^53, checked by the client).
-- Admitted iff prev*(P - e) + (curr + n)*P <= limit*P, e = time into window k.
local function sliding_window(key, now, cost, grace, a1, a2)
  local p = a1
  local limit = a2
  -- w: the period the state was written under. State of another period (set_quota
  -- changed it) counts windows that mean nothing now: the windows restart.
  local s = redis.call('HMGET', key, 'k', 'p', 'c', 'w')
  local sk = tonumber(s[1] or '0')
  local sp = tonumber(s[2] or '0')
  local sc = tonumber(s[3] or '0')
  if s[4] and tonumber(s[4]) ~= p then
    sk, sp, sc = 0, 0, 0
  end
  local current = idiv(now, p)
  local k, e, prev, curr
  -- A state in a window later than the reading's was written by a newer reading (the
  -- Redis mode books no reservations, so nothing here is booked ahead: another
  -- instance's clock, or a caller's clock that stepped back). The reading is decided
  -- at the state's time, the earliest one consistent with it: its window's start, where
  -- the previous window weighs the most, as the local engine decides a reading behind
  -- an unmarked state. Waits are measured from the reading itself (plus the lag).
  local lag = 0
  if current < sk then
    k, e, prev, curr = sk, 0, sp, sc
    lag = sk * p - now
  else
    k = current
    e = now - current * p
    local d = current - sk
    if d == 0 then
      prev, curr = sp, sc
    elseif d == 1 then
      prev, curr = sc, 0
    else
      prev, curr = 0, 0
    end
  end

  -- Whether prev*(P - e) + (c + n)*P <= limit*P, without products above limit*P.
  local function fits(c, n)
    if c + n > limit then
      return false
    end
    return prev * (p - e) <= (limit - c - n) * p
  end

  local function remaining(c)
    local used = prev * (p - e)
    local budget = limit * p
    if used >= budget then
      return 0
    end
    local r = idiv(budget - used, p) - c
    if r < 0 then
      return 0
    end
    return r
  end

  -- The exact shortest wait until a request of cost n <= limit fits, from the view.
  local function wait_from_view(c, n)
    if c + n <= limit then
      if prev == 0 then
        return 0
      end
      local overlap = idiv((limit - c - n) * p, prev)
      if overlap >= p then
        return 0
      end
      if overlap > 0 then
        return math.max(p - overlap - e, 0)
      end
    end
    local e_next = 0
    if c > 0 then
      e_next = math.max(p - idiv((limit - n) * p, c), 0)
    end
    return (p - e) + e_next
  end

  -- The exact shortest wait until a request of cost n <= limit fits, from the reading.
  local function wait(c, n)
    local w = wait_from_view(c, n)
    if w == 0 then
      return 0
    end
    return w + lag
  end

  -- A zero-cost peek asks for nothing: always allowed.
  if cost == 0 or fits(curr, cost) then
    local after = curr + cost
    local write = nil
    if cost > 0 then
      write = function()
        redis.call('HSET', key, 'k', fmt(k), 'p', fmt(prev), 'c', fmt(after), 'w', fmt(p))
        -- Idle once window k + 1 has passed: neither count weighs anything then.
        redis.call('PEXPIRE', key, ttl_ms((k + 2) * p - now, grace))
      end
    end
    return {1, remaining(after), wait(after, limit), 0, 0}, write
  end
  return {0, remaining(curr), wait(curr, limit), wait(curr, cost), 0}, nil
end
