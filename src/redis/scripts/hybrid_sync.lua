-- Hybrid sync for a batch of keys. For key i (1-based): KEYS[2i-1], KEYS[2i] are the
-- hashes of its windows k-1 and k (same hash tag, so one batch never crosses a slot
-- when the client groups by slot), one field per instance holding that instance's
-- cumulative admissions in the window. ARGV[1]: this instance's id. ARGV[4i-2],
-- ARGV[4i-1]: its cumulative counts for the two windows (-1: nothing to write, only
-- read); ARGV[4i], ARGV[4i+1]: their TTLs in ms.
--
-- Idempotent: a count is *set*, never added, and only ever raised (counts within a
-- window only grow), so a sync whose reply was lost can be sent again, or arrive
-- late, without counting anything twice. Sets the TTL with the write (a hash never
-- lives without one) and replies, per key, with both windows' global counts (the sum
-- over every instance's field), flattened: {prev_1, curr_1, prev_2, curr_2, ...}.
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
local out = {}
for i = 1, #KEYS / 2 do
  local a = 4 * i - 2
  out[2 * i - 1] = put(KEYS[2 * i - 1], tonumber(ARGV[a]), ARGV[a + 2])
  out[2 * i] = put(KEYS[2 * i], tonumber(ARGV[a + 1]), ARGV[a + 3])
end
return out
