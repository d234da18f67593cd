-- include: clock fence records hold
-- rw_write.lua: take an RWMutex for writing: no writer and no live reader.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms),
--        intent (a waiting writer's), record (the writer's fence record, on a
--        quorum's master only: see recorded_fence)]
-- ARGV: [token, ttl_ms, metadata, writer_preference ('1' or '0'),
--        set_metadata ('1' or '0': keep the stored metadata on re-entry),
--        will_wait ('1': a busy answer marks the writer's key waited on, `w`,
--        so the release of the writer or of the last reader wakes this one),
--        waited ('1': this writer waited before: its hold is marked, for
--        those behind it)]
-- Returns {1, fence} when writing (the writer's key then holds as a Lock's does),
-- or {0, wait_ms}: the writer's pttl, or until the last live reader expires.
-- A writer that must wait for readers leaves its intent (writer preference):
-- new readers wait behind it; the intent expires by itself after ttl_ms.
local writer, readers, intent, record = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl_ms, metadata, writer_preference = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local set_metadata, will_wait, waited = ARGV[5] == '1', ARGV[6] == '1', ARGV[7] == '1'

local meta = set_metadata and metadata

local owner, had, flags, kept = read_hold(writer)
if owner and owner ~= token then
  if will_wait then
    waited_on(writer, owner, had, flags, kept)
  end
  return {0, redis.call('PTTL', writer)}
end
if owner == token then
  return hold(writer, token, meta or kept, ttl_ms, had, false, false, flags)
end

local us = now_us()
local now = math.floor(us / 1000)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
if last[1] then
  if writer_preference then
    local other = redis.call('GET', intent)
    if not other or other == token then
      redis.call('SET', intent, token, 'PX', ttl_ms)
    end
  end
  local wait = tonumber(last[2]) - now
  if will_wait then
    -- No writer holds: the mark alone keeps the key, as long as the readers.
    waited_on(writer, owner, had, flags, kept)
    if redis.call('PTTL', writer) < wait then
      redis.call('PEXPIRE', writer, wait)
    end
  end
  return {0, wait}
end

if redis.call('GET', intent) == token then
  redis.call('DEL', intent)
end
local fence = next_fence(math.max(had, recorded_fence(record)), us)
remember_fence(record, fence, us)
-- A mark left while readers held (`w`, no token) stays: its waiters wait
-- for this writer now.
return hold(writer, token, meta, ttl_ms, fence, waited, fence > us, flags)
