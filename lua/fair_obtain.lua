-- fair_obtain.lua: take a lock in arrival order (fair mode).
-- KEYS: [lock hash, queue zset (token -> arrival, server us), liveness zset (token -> expiry, server ms)]
-- ARGV: [token, ttl_ms, metadata, patience_ms, will_wait ('1' or '0')]
-- Returns {1, fence} when this owner holds the lock: taken now as the head of
-- the queue, or handed to it by the previous holder's release (then claimed:
-- the full ttl and its metadata set), or re-entered. Otherwise {0, wait_ms}:
-- the holder's pttl, or -1 when the lock is free but another waiter is first.
-- A waiter that will wait joins the queue (once) and re-asserts that it is
-- alive for patience_ms; one that stops doing so is dropped from the queue.
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local token, ttl, meta, patience = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])

local us = now_us()
local now = math.floor(us / 1000)
prune_waiters(alive, now, queue)

local rec = redis.call('HMGET', lock, 'token', 'fence')
if rec[1] == token then
  return fair_hold(lock, queue, alive, token, meta, ttl, tonumber(rec[2]))
end
if not rec[1] then
  local head = redis.call('ZRANGE', queue, 0, 0)[1]
  if not head or head == token then
    local fence = math.max(us, (tonumber(rec[2]) or 0) + 1)
    return fair_hold(lock, queue, alive, token, meta, ttl, fence)
  end
end

if ARGV[5] == '1' then
  enqueue(queue, alive, token, us, patience)
end
if rec[1] then
  return {0, redis.call('PTTL', lock)}
end
return {0, -1}
