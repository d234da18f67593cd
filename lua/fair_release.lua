-- fair_release.lua: give a fair lock up, straight to the head of the queue.
-- KEYS: [lock hash, queue zset (token -> arrival, server us), liveness zset (token -> expiry, server ms)]
-- ARGV: [token, channel, patience_ms]
-- Also how a waiter leaves the queue: it is removed first, and if the lock
-- had meanwhile been handed to it, the lock goes on to the next in line.
-- Returns 1 when this owner held the lock (released now), else 0.
-- The new holder leaves the queue and is announced on `channel` as
-- '<token> <fence>', so only it wakes, and it holds from that message on (no
-- round trip to claim it): its first renewal, sent at once, sets its full
-- ttl. If it does not renew within patience_ms, the hand-over lapses.
local lock, queue, alive = KEYS[1], KEYS[2], KEYS[3]
local token, channel, patience = ARGV[1], ARGV[2], tonumber(ARGV[3])

redis.call('ZREM', queue, token)
redis.call('ZREM', alive, token)
if redis.call('HGET', lock, 'token') ~= token then
  return 0
end

local us = now_us()
prune_waiters(alive, math.floor(us / 1000), queue)

local last = tonumber(redis.call('HGET', lock, 'fence')) or 0
local head = redis.call('ZRANGE', queue, 0, 0)[1]
if head then
  hand_over(lock, queue, alive, head, last, us, patience, channel)
  return 1
end
end_hold(lock, last, us)
publish(channel, '')
return 1
