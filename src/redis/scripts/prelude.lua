-- tollgate prelude (prepended to every script): helpers. All numbers are integers
-- below 2^53 (checked by the client at build time), so Lua's doubles compute them
-- exactly. Each algorithm is a function of (key, now, cost, grace, a1, a2, a3, peek)
-- that reads the key's state and returns its reply {allowed, remaining, reset_after_us,
-- retry_after_us, delay_us} and the write to make if the request is admitted (a
-- function, or nil): single.lua runs one and writes, multi.lua runs several and writes
-- only if all admit. With `peek` true (single.lua's peek mode) it writes nothing of its
-- own either (the clean-ups and conversions it otherwise makes while deciding), and the
-- caller makes no write: the key is left exactly as it was.

-- floor(a / b) for integers 0 <= a, 0 < b, corrected for the double division's rounding.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  elseif (q + 1) * b <= a then
    q = q + 1
  end
  return q
end

local function fmt(x)
  return string.format('%d', x)
end

-- TTL in whole milliseconds, rounded up, from a span in microseconds, plus `grace`
-- milliseconds (for a caller's clock, which runs apart from the Redis clock).
local function ttl_ms(span_us, grace)
  return fmt(idiv(span_us + 999, 1000) + grace)
end

-- Redis TIME in microseconds.
local function redis_now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end
