-- tollgate prelude (prepended to every script). All numbers are integers below 2^53
-- (checked by the client at build time), so Lua's doubles compute them exactly.
-- ARGV[1]: the caller's time in microseconds, or -1 for Redis TIME.
-- ARGV[2]: the cost. ARGV[3]: extra TTL in milliseconds (caller-clock grace).

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

-- TTL in whole milliseconds, rounded up, from a span in microseconds.
local function ttl_ms(span_us)
  return fmt(idiv(span_us + 999, 1000) + tonumber(ARGV[3]))
end

local now = tonumber(ARGV[1])
if now < 0 then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local cost = tonumber(ARGV[2])
