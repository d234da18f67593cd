-- include: clock queue leases rw_fair
-- rw_fair_read.lua: join the readers of a fair RWMutex, in arrival order.
-- KEYS: [writer hash, readers zset (token -> expiry, server ms),
--        queued readers, queued writers (token -> arrival, server us),
--        liveness zset (token -> expiry, server ms), tags hash (token -> '<attempt> <patience_ms>')]
-- ARGV: [token, ttl_ms, patience_ms, will_wait ('1' or '0'), attempt, channel]
-- A reader enters when no writer holds and no writer queued before it; one
-- that a release let in (already among the readers) claims its full ttl.
-- Returns {1, 0} when reading, or {0, wait_ms}: the writer's pttl, or -1
-- when a queued writer goes first. A reader that will wait joins the queue
-- (once), re-asserts that it is alive for patience_ms and is tagged with this
-- attempt. When nobody holds but others are first, they are let in now.
local writer, readers, qr, qw, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local token, ttl, patience, attempt, channel = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), ARGV[5], ARGV[6]

local us = now_us()
local now = math.floor(us / 1000)
-- Nobody queued (no liveness set): no queue to prune, leave or look behind.
-- Expired readers are left to the releases, which prune them (and to this
-- attempt when someone queues).
local queued = redis.call('EXISTS', alive) == 1
if queued then
  prune_waiters(alive, tags, now, qr, qw)
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
end

local function enter()
  redis.call('ZADD', readers, now + ttl, token)
  if queued then
    leave_queue(alive, tags, token, qr)
  end
  expire_with_last_reader(readers, now)
  return {1, 0}
end

if (tonumber(redis.call('ZSCORE', readers, token)) or 0) > now then
  return enter()
end
local wait
if redis.call('HEXISTS', writer, 'token') == 1 then
  wait = redis.call('PTTL', writer)
elseif not queued then
  return enter()
else
  local first = redis.call('ZRANGE', qw, 0, 0, 'WITHSCORES')
  local mine = tonumber(redis.call('ZSCORE', qr, token))
  if not first[1] or (mine and mine < tonumber(first[2])) then
    return enter()
  end
  wait = -1
end
if ARGV[4] == '1' then
  enqueue(qr, alive, tags, token, us, patience, attempt)
end
if wait == -1 and redis.call('ZCARD', readers) == 0 then
  rw_serve(writer, readers, qr, qw, alive, tags, us, channel)
end
return {0, wait}
