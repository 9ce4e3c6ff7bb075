-- Hybrid sync for one key. KEYS[1], KEYS[2]: the counters of windows k-1 and k (same
-- hash tag). ARGV[1], ARGV[2]: this instance's unflushed counts for them. ARGV[3],
-- ARGV[4]: their TTLs in ms. Adds and sets the TTL atomically (a counter never lives
-- without a TTL); replies with both global counts.
local function bump(key, add, ttl)
  if add > 0 then
    local v = redis.call('INCRBY', key, add)
    redis.call('PEXPIRE', key, ttl)
    return v
  end
  return tonumber(redis.call('GET', key) or '0')
end
return {bump(KEYS[1], tonumber(ARGV[1]), ARGV[3]), bump(KEYS[2], tonumber(ARGV[2]), ARGV[4])}
