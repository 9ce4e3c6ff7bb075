-- Hybrid sync for one key. KEYS[1], KEYS[2]: hashes of windows k-1 and k (same hash
-- tag), one field per instance holding that instance's cumulative admissions in the
-- window. ARGV[1]: this instance's id. ARGV[2], ARGV[3]: its cumulative counts for the
-- two windows (-1: nothing to write, only read). ARGV[4], ARGV[5]: TTLs in ms.
--
-- Idempotent: a count is *set*, never added, and only ever raised (counts within a
-- window only grow), so a sync whose reply was lost can be sent again, or arrive
-- late, without counting anything twice. Sets the TTL with the write (a hash never
-- lives without one) and replies with both windows' global counts: the sum over
-- every instance's field.
local function put(key, own, ttl)
  if own >= 0 then
    local old = tonumber(redis.call('HGET', key, ARGV[1]) or '-1')
    if own > old then
      redis.call('HSET', key, ARGV[1], own)
    end
    redis.call('PEXPIRE', key, ttl)
  end
  local sum = 0
  for _, v in ipairs(redis.call('HVALS', key)) do
    sum = sum + tonumber(v)
  end
  return sum
end
return {put(KEYS[1], tonumber(ARGV[2]), ARGV[4]), put(KEYS[2], tonumber(ARGV[3]), ARGV[5])}
