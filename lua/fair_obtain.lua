-- include: fence hold wake queue handover
-- fair_obtain.lua: take a lock in arrival order (fair mode).
-- KEYS: [lock (the hold, lib/hold.lua), queue (a zset: token -> arrival, server us),
--        alive (liveness, a zset: token -> expiry, server ms),
--        tags (a hash: token -> '<attempt> <patience_ms>')]
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0': keep on re-entry),
--        patience_ms, will_wait ('1' or '0'), attempt, channel,
--        announce (a channel told '' whenever this token takes or claims the
--        lock, or '' for none: an election's leader changes are watched there)]
-- Returns {1, fence} (a number, or its decimal text) when this owner holds the lock: taken now as the head of
-- the queue, or handed to it by a release (then claimed: the full ttl set),
-- or re-entered. Otherwise {0, wait_ms}: the holder's pttl, or -1 when the
-- lock is free but another waiter is first (then that waiter is handed the
-- lock now, so a hand-over that lapsed passes on at once; an election's
-- head is woken to claim it itself).
-- A waiter that will wait joins the queue (once), re-asserts that it is alive
-- for patience_ms, and is tagged with this attempt; one that stops doing so
-- is dropped from the queue. A hold taken or handed over while others queue,
-- or that a waiter queues behind, is marked waited on (flag `w`, lib/hold.lua):
-- only such a hold's release reads the queue (fair_release.lua).
local lock, queue, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, ttl_ms, metadata, set_metadata = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local patience_ms, will_wait, attempt = tonumber(ARGV[5]), ARGV[6] == '1', ARGV[7]
local channel, announce = ARGV[8], ARGV[9] or ''

-- No key (no hold, no fence kept on record) and nobody queued: the lock is
-- taken with the clock's fence (lib/clock.lua's now_us, lib/hold.lua's hold
-- and its value, written out here: this runs before the libraries are built).
-- The fence is the clock's two parts joined as text (obtain.lua says why).
local time = redis.call('TIME')
if redis.call('EXISTS', lock, queue) == 0 then
  local fence = time[1] .. string.sub('00000' .. time[2], -6)
  local value = token .. ' ' .. fence .. ' '
  if set_metadata then
    value = value .. ' ' .. metadata
  end
  redis.call('SET', lock, value, 'PX', ttl_ms)
  if announce ~= '' then
    redis.call(PUBLISH, announce, '')
  end
  return {1, fence}
end
-- libraries here
local us = tonumber(time[1]) * 1000000 + tonumber(time[2])

local meta = set_metadata and metadata
local function held(reply)
  if announce ~= '' then
    publish(announce, '')
  end
  return reply
end

local owner, last, flags, had = read_hold(lock)
if owner == token then
  leave_queue(alive, tags, token, queue)
  return held(hold(lock, token, meta or had, ttl_ms, last, false, false, flags))
end
-- The queue is pruned only when it has someone else at its head: a free
-- lock nobody queues for is taken with no sorted-set scan.
local head = redis.call('ZRANGE', queue, 0, 0)[1]
if head and (head ~= token or owner) then
  prune_waiters(alive, tags, math.floor(us / 1000), queue)
  head = redis.call('ZRANGE', queue, 0, 0)[1]
end
if not owner and (not head or head == token) then
  local waited = false
  if head then
    leave_queue(alive, tags, token, queue)
    waited = redis.call('EXISTS', queue) == 1
  end
  local fence = next_fence(last, us)
  return held(hold(lock, token, meta, ttl_ms, fence, waited, fence > us))
end

if will_wait then
  enqueue(queue, alive, tags, token, us, patience_ms, attempt)
end
if owner then
  if will_wait then
    waited_on(lock, owner, last, flags, had)
  end
  return {0, redis.call('PTTL', lock)}
end
if announce ~= '' then
  publish(channel, '')  -- an election's head claims a free term itself: wake it
else
  serve_head(lock, queue, alive, tags, last, us, channel)
end
return {0, -1}
