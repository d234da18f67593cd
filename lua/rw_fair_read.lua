-- include: hold queue leases rw_fair
-- rw_fair_read.lua: join the readers of a fair RWMutex, in arrival order.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms),
--        queued_readers, queued_writers (zsets: token -> arrival, server us),
--        alive (liveness, a zset: token -> expiry, server ms),
--        tags (a hash: token -> '<attempt> <patience_ms>')]
-- ARGV: [token, ttl_ms, patience_ms, will_wait ('1' or '0'), attempt, channel]
-- A reader enters when no writer holds and no writer queued before it; one
-- that a release let in (already among the readers) claims its full ttl.
-- Returns {1, 0} when reading, or {0, wait_ms}: the writer's pttl, or -1
-- when a queued writer goes first. A reader that will wait joins the queue
-- (once), re-asserts that it is alive for patience_ms and is tagged with this
-- attempt. When nobody holds but others are first, they are let in now.
local writer, readers, queued_readers, queued_writers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local alive, tags = KEYS[5], KEYS[6]
local token, ttl_ms, patience_ms = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local will_wait, attempt, channel = ARGV[4] == '1', ARGV[5], ARGV[6]

-- Nobody queued (no liveness set), no writer's key and no reader: this one
-- enters alone, reading nothing else; its lease is the set's only one, so
-- the set lives as long (lib/clock.lua's now_us, lib/leases.lua's
-- expire_with_only_lease, written out here: this runs before the libraries
-- are built).
local time = redis.call('TIME')
local us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(us / 1000)
if redis.call('EXISTS', alive, writer, readers) == 0 then
  redis.call('ZADD', readers, now + ttl_ms, token)
  redis.call('PEXPIRE', readers, ttl_ms)
  return {1, 0}
end
-- libraries here

-- Nobody queued (no liveness set): no queue to prune, leave or look behind.
-- Expired readers are left to the releases, which prune them (and to this
-- attempt when someone queues).
local waiting = redis.call('EXISTS', alive, writer)
local queued = waiting == 2 or (waiting == 1 and redis.call('EXISTS', alive) == 1)
if queued then
  prune_waiters(alive, tags, now, queued_readers, queued_writers)
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
end

local function enter()
  redis.call('ZADD', readers, now + ttl_ms, token)
  if queued then
    leave_queue(alive, tags, token, queued_readers)
  end
  expire_with_last_reader(readers, now)
  return {1, 0}
end

-- Only readers (no queue, no writer's key): this one enters beside them.
if waiting == 0 or (tonumber(redis.call('ZSCORE', readers, token)) or 0) > now then
  return enter()
end
local wait
if read_hold(writer) then
  wait = redis.call('PTTL', writer)
elseif not queued then
  return enter()
else
  local first = redis.call('ZRANGE', queued_writers, 0, 0, 'WITHSCORES')
  local mine = tonumber(redis.call('ZSCORE', queued_readers, token))
  if not first[1] or (mine and mine < tonumber(first[2])) then
    return enter()
  end
  wait = -1
end
if will_wait then
  enqueue(queued_readers, alive, tags, token, us, patience_ms, attempt)
end
if wait == -1 and redis.call('ZCARD', readers) == 0 then
  rw_serve(writer, readers, queued_readers, queued_writers, alive, tags, us, channel)
end
return {0, wait}
