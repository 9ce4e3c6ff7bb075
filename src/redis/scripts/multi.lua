-- Several limits, all or nothing. KEYS[i]: limit i's key (all distinct: the client
-- refuses a key given twice). ARGV[1]: the cost. Then six arguments per limit i, from
-- ARGV[2 + 6 * (i - 1)]: its algorithm (1 GCRA, 2 fixed window, 3 sliding window,
-- 4 sliding log), the caller's time in microseconds or -1 for Redis TIME, the extra TTL
-- in milliseconds, and the algorithm's three parameters.
-- Every limit is decided on the state as it was before the call; the writes are made
-- only if every limit admits, so a denial by any consumes nothing from the others.
-- Reply: each limit's {allowed, remaining, reset_after_us, retry_after_us, delay_us},
-- flattened in order.
local algorithms = {gcra, fixed_window, sliding_window, sliding_log}
local cost = tonumber(ARGV[1])
local server_now = nil
local out, writes, all = {}, {}, true
for i = 1, #KEYS do
  local a = 2 + 6 * (i - 1)
  local now = tonumber(ARGV[a + 1])
  if now < 0 then
    server_now = server_now or redis_now()
    now = server_now
  end
  local decide = algorithms[tonumber(ARGV[a])]
  local reply, write = decide(KEYS[i], now, cost, tonumber(ARGV[a + 2]),
    tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5]))
  if reply[1] ~= 1 then
    all = false
  end
  writes[i] = write
  for j = 1, 5 do
    out[#out + 1] = reply[j]
  end
end
if all then
  for i = 1, #KEYS do
    if writes[i] then
      writes[i]()
    end
  end
end
return out
