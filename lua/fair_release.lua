-- include: clock hold wake queue handover
-- fair_release.lua: give a fair lock up, straight to the head of the queue;
-- also how a waiter leaves the queue.
-- KEYS: [lock (the hold, lib/hold.lua), queue (a zset: token -> arrival, server us),
--        alive (liveness, a zset: token -> expiry, server ms),
--        tags (a hash: token -> '<attempt> <patience_ms>')]
-- ARGV: [token, channel, release ('1': release this token's hold too;
--        '0': only leave the queue, as a cancelled adopt of a restored hold does),
--        announce (a channel told '' when the hold is released, or '')]
-- Returns 1 when this owner held the lock (released now), else 0. A release
-- of a hold no waiter marked (nobody queues: a fair waiter always queues,
-- and marks the hold it queues behind) reads no queue and publishes nothing.
-- Whenever the lock ends up free (released, a hand-over lapsed, or a waiter
-- left while it was free) the head of the queue gets it: it leaves the queue
-- and is announced on `channel` with a grant (lib/wake.lua), so only it
-- wakes, and it holds from that message on (no round trip to claim it); its first renewal, sent at once,
-- sets its full ttl. If it does not renew within its own patience, the
-- hand-over lapses and the next attempt of anyone passes it on.
local lock, queue, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local token, channel, release, announce = ARGV[1], ARGV[2], ARGV[3] == '1', ARGV[4] or ''

-- Its own hold that no waiter marked (fair_obtain.lua marks a hold anyone
-- queues behind): nobody queues, so no queue to read, leave or serve, and
-- nobody to wake. A fence the clock gave (no mark `a`, lib/hold.lua) goes
-- with the hold, before the libraries are built (lib/hold.lua's value read
-- here).
local value = release and redis.pcall('GET', lock)
local mine, marks
if type(value) == 'string' then
  mine, marks = string.match(value, '^(%S*) %d* (%a*)')
end
if mine == token and marks == '' then
  redis.call('DEL', lock)
  if announce ~= '' then
    redis.call(PUBLISH, announce, '')
  end
  return 1
end
-- libraries here

local owner, last, flags = read_hold(lock)
local waited = flagged(flags, 'w')
if release and owner == token and not waited then
  end_hold(lock, last, now_us())  -- kept until the clock passes its fence
  if announce ~= '' then
    publish(announce, '')
  end
  return 1
end
local queued = redis.call('EXISTS', queue) == 1
-- The clock: for the queue, or to keep a fence ahead of it (lib/hold.lua).
local us
if queued or flagged(flags, 'a') then
  us = now_us()
end
if queued then
  leave_queue(alive, tags, token, queue)
  prune_waiters(alive, tags, math.floor(us / 1000), queue)
end
local released = 0
if owner == token and release then
  released = 1
elseif owner then
  return 0
end
if announce ~= '' then
  -- An election: the next campaigner claims the term itself, with its value,
  -- so watchers never see a term without one. Woken here, it is one round
  -- trip away; newcomers cannot pass it (only the head may take a free term).
  if released == 1 then
    end_hold(lock, last, us)
  end
  if queued and (released == 1 or redis.call('EXISTS', queue) == 1) then
    -- Also when a waiter (the head, maybe) left a free term: the next in
    -- line claims it now, not at its own next look.
    publish(channel, '')
  end
  if released == 1 then
    publish(announce, '')
  end
  return released
end
if queued and serve_head(lock, queue, alive, tags, last, us, channel) then
  return released
end
if released == 1 then
  end_hold(lock, last, us)
  if queued then
    publish(channel, '')
  end
end
return released
