-- include: hold wake queue rw_fair
-- rw_fair_release.lua: leave a fair RWMutex (or its queue), handing it on.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms),
--        queued_readers, queued_writers (zsets: token -> arrival, server us),
--        alive (liveness, a zset: token -> expiry, server ms),
--        tags (a hash: token -> '<attempt> <patience_ms>')]
-- ARGV: [token, side ('r' or 'w'), channel, release ('1': release this
--        token's hold too; '0': only leave the queue, as a cancelled adopt
--        of a restored hold does)]
-- Returns 1 when this owner held (released now), else 0.
-- Whenever nobody holds afterwards, whoever is next is let in (see rw_serve
-- in lib/rw_fair.lua): the readers queued before the first queued writer, or
-- that writer once no reader is left. The new holders leave the queue and
-- are named on `channel` in one grants message (lib/wake.lua; fence 0
-- for a reader). They hold from that message on; their first renewal, sent
-- at once, sets their full ttl, and what they were given lapses after their
-- own patience if it does not come.
local writer, readers, queued_readers, queued_writers = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local alive, tags = KEYS[5], KEYS[6]
local token, side, channel, release = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'

-- Nobody queued (no liveness set): nothing to leave, prune or serve, and
-- nobody to tell (a fair waiter always queues). A reader's release then
-- needs no helper: it ends before the libraries are built.
local queued = redis.call('EXISTS', alive) == 1
local time = redis.call('TIME')
local us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(us / 1000)
local held = 0
if release and side == 'r' then
  -- Expired readers go first, so removing this one answers whether it was live.
  redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
  held = redis.call('ZREM', readers, token)
end
if not queued and side == 'r' then
  return held
end
-- libraries here

if queued then
  leave_queue(alive, tags, token, queued_readers, queued_writers)
end
if release and side == 'w' then
  local owner, fence = read_hold(writer)
  if owner == token then
    end_hold(writer, fence, us)
    held = 1
  end
end
if not queued then
  return held
end

prune_waiters(alive, tags, now, queued_readers, queued_writers)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
if not rw_serve(writer, readers, queued_readers, queued_writers, alive, tags, us, channel) and held == 1
    and redis.call('ZCARD', readers) == 0 then
  publish(channel, '')
end
return held
