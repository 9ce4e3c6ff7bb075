-- One limit. KEYS[1]: its key. ARGV[1]: the caller's time in microseconds, or -1 for
-- Redis TIME. ARGV[2]: the cost. ARGV[3]: extra TTL in milliseconds (caller-clock
-- grace). ARGV[4..6]: the algorithm's parameters.
local function single(decide)
  local now = tonumber(ARGV[1])
  if now < 0 then
    now = redis_now()
  end
  local reply, write = decide(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]),
    tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]))
  if write then
    write()
  end
  return reply
end
