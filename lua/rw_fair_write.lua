-- include: clock fence hold queue rw_fair
-- rw_fair_write.lua: take a fair RWMutex for writing, in arrival order.
-- KEYS: [writer hash, readers zset (token -> expiry, server ms),
--        queued readers, queued writers (token -> arrival, server us),
--        liveness zset (token -> expiry, server ms), tags hash (token -> '<attempt> <patience_ms>')]
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0': keep on re-entry),
--        patience_ms, will_wait ('1' or '0'), attempt, channel]
-- A writer enters when nobody holds and nobody queued before it; one that a
-- release handed the writer hash to claims it (full ttl).
-- Returns {1, fence} when writing, or {0, wait_ms}: the writer's pttl, until
-- the last live reader expires, or -1 when a waiter queued before it goes
-- first (when nobody holds, that waiter is let in now).
local writer, readers, qr, qw, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, ttl, patience, attempt, channel = ARGV[1], ARGV[2], tonumber(ARGV[5]), ARGV[7], ARGV[8]
local meta = ARGV[4] == '1' and ARGV[3]

local us = now_us()
local now = math.floor(us / 1000)
prune_waiters(alive, tags, now, qr, qw)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)

local rec = redis.call('HMGET', writer, 'token', 'fence')
if rec[1] == token then
  leave_queue(alive, tags, token, qw)
  return hold(writer, token, meta, ttl, tonumber(rec[2]))
end

local wait = -1
if rec[1] then
  wait = redis.call('PTTL', writer)
else
  -- First in line: the oldest queued writer is this one (or there is none and
  -- this one is not queued), and no reader queued before it.
  local mine = tonumber(redis.call('ZSCORE', qw, token))
  local w = redis.call('ZRANGE', qw, 0, 0)[1]
  local r = redis.call('ZRANGE', qr, 0, 0, 'WITHSCORES')
  local first = (w == token or (not w and not mine))
    and (not r[1] or (mine and tonumber(r[2]) >= mine))
  if first then
    local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
    if not last[1] then
      leave_queue(alive, tags, token, qw)
      return hold(writer, token, meta, ttl, next_fence(tonumber(rec[2]) or 0, us))
    end
    wait = tonumber(last[2]) - now
  end
end
if ARGV[6] == '1' then
  enqueue(qw, alive, tags, token, us, patience, attempt)
end
if wait == -1 and redis.call('ZCARD', readers) == 0 then
  rw_serve(writer, readers, qr, qw, alive, tags, us, channel)
end
return {0, wait}
