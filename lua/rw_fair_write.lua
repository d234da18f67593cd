-- include: clock fence hold queue rw_fair
-- rw_fair_write.lua: take a fair RWMutex for writing, in arrival order.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms),
--        queued_readers, queued_writers (zsets: token -> arrival, server us),
--        alive (liveness, a zset: token -> expiry, server ms),
--        tags (a hash: token -> '<attempt> <patience_ms>')]
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0': keep on re-entry),
--        patience_ms, will_wait ('1' or '0'), attempt, channel]
-- A writer enters when nobody holds and nobody queued before it; one that a
-- release handed the writer's hold to claims it (full ttl).
-- Returns {1, fence} when writing, or {0, wait_ms}: the writer's pttl, until
-- the last live reader expires, or -1 when a waiter queued before it goes
-- first (when nobody holds, that waiter is let in now).
local writer, readers, queued_readers, queued_writers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local alive, tags = KEYS[5], KEYS[6]
local token, ttl_ms, metadata, set_metadata = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local patience_ms, will_wait, attempt, channel = tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7], ARGV[8]

local meta = set_metadata and metadata

local us = now_us()
local now = math.floor(us / 1000)
prune_waiters(alive, tags, now, queued_readers, queued_writers)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)

local owner, had, flags, kept = read_hold(writer)
if owner == token then
  leave_queue(alive, tags, token, queued_writers)
  return hold(writer, token, meta or kept, ttl_ms, had, false, false, flags)
end

local wait = -1
if owner then
  wait = redis.call('PTTL', writer)
else
  -- First in line: the oldest queued writer is this one (or there is none and
  -- this one is not queued), and no reader queued before it.
  local mine = tonumber(redis.call('ZSCORE', queued_writers, token))
  local w = redis.call('ZRANGE', queued_writers, 0, 0)[1]
  local r = redis.call('ZRANGE', queued_readers, 0, 0, 'WITHSCORES')
  local first = (w == token or (not w and not mine))
    and (not r[1] or (mine and tonumber(r[2]) >= mine))
  if first then
    local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
    if not last[1] then
      leave_queue(alive, tags, token, queued_writers)
      return hold(writer, token, meta, ttl_ms, next_fence(had, us))
    end
    wait = tonumber(last[2]) - now
  end
end
if will_wait then
  enqueue(queued_writers, alive, tags, token, us, patience_ms, attempt)
end
if wait == -1 and redis.call('ZCARD', readers) == 0 then
  rw_serve(writer, readers, queued_readers, queued_writers, alive, tags, us, channel)
end
return {0, wait}
