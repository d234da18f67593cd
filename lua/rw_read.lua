-- include: clock hold leases
-- rw_read.lua: join the readers of an RWMutex, each reader with its own expiry.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms), intent (a waiting writer's)]
-- ARGV: [token, ttl_ms, writer_preference ('1' or '0'),
--        will_wait ('1': a writer's hold found is marked waited on, so its
--        release wakes this reader)]
-- Returns {1, 0} when reading (joined now, or already a reader: expiry pushed),
-- or {0, wait_ms}: a writer holds (its pttl), or a writer waits (its intent's pttl).
-- Expired readers are left to the writers and the key's expiry: a writer
-- prunes them before it counts the readers (rw_write.lua).
local writer, readers, intent = KEYS[1], KEYS[2], KEYS[3]
local token, ttl_ms, writer_preference, will_wait = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4] == '1'

-- One command for what the usual case needs to know: EXISTS counts a key
-- named twice twice, so the writer's key and the intent add 2 each and
-- the readers' set 1: under 2, neither is there; odd, the set is.
local found = redis.call('EXISTS', writer, writer, intent, intent, readers)
-- Neither is there: this reader joins, before the libraries are built
-- (lib/clock.lua's now_ms and lib/leases.lua's expire_with_new_lease,
-- written out here).
if found < 2 then
  local time = redis.call('TIME')
  local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
  redis.call('ZADD', readers, now + ttl_ms, token)
  if found == 0 or redis.call('PTTL', readers) < tonumber(ttl_ms) then
    redis.call('PEXPIRE', readers, ttl_ms)  -- its text: no number formatted
  end
  return {1, 0}
end
-- libraries here

local owner, fence, flags, meta = read_hold(writer)
if owner then
  if will_wait then
    waited_on(writer, owner, fence, flags, meta)  -- its release wakes this reader
  end
  return {0, redis.call('PTTL', writer)}
end
local now = now_ms()
if writer_preference and redis.call('EXISTS', intent) == 1
    and (tonumber(redis.call('ZSCORE', readers, token)) or 0) <= now then
  return {0, redis.call('PTTL', intent)}
end

redis.call('ZADD', readers, now + ttl_ms, token)
expire_with_new_lease(readers, tonumber(ttl_ms), found % 2 == 0)
return {1, 0}
