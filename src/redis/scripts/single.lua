-- One limit. KEYS[1]: its key. ARGV[1]: the caller's time in microseconds, or -1 for
-- Redis TIME. ARGV[2]: the cost. ARGV[3]: extra TTL in milliseconds (caller-clock
-- grace). ARGV[4..6]: the algorithm's parameters. ARGV[7]: 1 for a peek: the same
-- decision, and nothing written at all (no count, no TTL, no clean-up, no conversion).
local function single(decide)
  local now = tonumber(ARGV[1])
  if now < 0 then
    now = redis_now()
  end
  local peek = ARGV[7] == '1'
  local reply, write = decide(KEYS[1], now, tonumber(ARGV[2]), tonumber(ARGV[3]),
    tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]), peek)
  if write and not peek then
    write()
  end
  return reply
end
