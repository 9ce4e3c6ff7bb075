-- Hybrid sync for a batch of keys. For key i (1-based): KEYS[2i-1], KEYS[2i] are the
-- hashes of its windows k-1 and k (same hash tag, so one batch never crosses a slot
-- when the client groups by slot), one field per instance holding that instance's
-- cumulative admissions in the window (charges included), and a field `<id>:g` per
-- instance that gave anything back in it, holding its cumulative give-backs. ARGV[1]:
-- this instance's id. From a = 6i - 4: ARGV[a], ARGV[a+1]: its cumulative admissions
-- for the two windows; ARGV[a+2], ARGV[a+3]: its cumulative give-backs (-1: nothing to
-- write, only read); ARGV[a+4], ARGV[a+5]: the two hashes' TTLs in ms.
--
-- Idempotent: a count is *set*, never added, and only ever raised (admissions and
-- give-backs within a window each only grow), so a sync whose reply was lost can be
-- sent again, or arrive late, without counting anything twice. Sets the TTL with the
-- write (a hash never lives without one) and replies, per key, with both windows'
-- global counts (every instance's admissions less every instance's give-backs, never
-- below 0), flattened: {prev_1, curr_1, prev_2, curr_2, ...}. (A version that only sums
-- the fields counts a give-back as an admission: never less than the true count.)
local function raise(key, field, v)
  local old = tonumber(redis.call('HGET', key, field) or '-1')
  if v > old then
    redis.call('HSET', key, field, v)
  end
end
local function put(key, own, given, ttl)
  if own >= 0 then
    raise(key, ARGV[1], own)
  end
  if given >= 0 then
    raise(key, ARGV[1] .. ':g', given)
  end
  if own >= 0 or given >= 0 then
    redis.call('PEXPIRE', key, ttl)
  end
  local sum = 0
  local all = redis.call('HGETALL', key)
  for j = 1, #all, 2 do
    local v = tonumber(all[j + 1])
    if string.sub(all[j], -2) == ':g' then
      sum = sum - v
    else
      sum = sum + v
    end
  end
  return math.max(0, sum)
end
local out = {}
for i = 1, #KEYS / 2 do
  local a = 6 * i - 4
  out[2 * i - 1] = put(KEYS[2 * i - 1], tonumber(ARGV[a]), tonumber(ARGV[a + 2]), ARGV[a + 4])
  out[2 * i] = put(KEYS[2 * i], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 3]), ARGV[a + 5])
end
return out
