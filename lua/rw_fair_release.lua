-- rw_fair_release.lua: leave a fair RWMutex (or its queue), handing it on.
-- KEYS: [writer hash, readers zset (token -> expiry, server ms),
--        queued readers, queued writers (token -> arrival, server us),
--        liveness zset (token -> expiry, server ms)]
-- ARGV: [token, side ('r' or 'w'), channel, patience_ms]
-- Also how a waiter leaves the queue: if a release had meanwhile let it in,
-- what it was given goes on to the next in line.
-- Returns 1 when this owner held (released now), else 0.
-- Hand-over, when nobody else holds: the readers queued before the first
-- queued writer all join the readers; failing those, the first writer gets
-- the writer hash once no reader is left. Either way the new holders leave
-- the queue and are named on `channel`, one a line ('<token>' for a reader,
-- '<token> <fence>' for a writer). They hold from that message on; their
-- first renewal, sent at once, sets their full ttl, and what they were given
-- lapses after patience_ms if it does not come.
local writer, readers, qr, qw, alive = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, side, channel, patience = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])

redis.call('ZREM', qr, token)
redis.call('ZREM', qw, token)
redis.call('ZREM', alive, token)

local us = now_us()
local now = math.floor(us / 1000)
local held = 0
local fence = tonumber(redis.call('HGET', writer, 'fence')) or 0
if side == 'w' then
  if redis.call('HGET', writer, 'token') ~= token then
    return 0
  end
  end_hold(writer, fence, us)
  held = 1
else
  local expiry = tonumber(redis.call('ZSCORE', readers, token))
  redis.call('ZREM', readers, token)
  if expiry and expiry > now then
    held = 1
  end
end

prune_waiters(alive, now, qr, qw)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
if redis.call('HEXISTS', writer, 'token') == 1 then
  return held
end

local w = redis.call('ZRANGE', qw, 0, 0, 'WITHSCORES')
local group
if w[1] then
  group = redis.call('ZRANGEBYSCORE', qr, '-inf', '(' .. w[2])
else
  group = redis.call('ZRANGE', qr, 0, -1)
end
if #group > 0 then
  for _, reader in ipairs(group) do
    redis.call('ZADD', readers, 'GT', now + patience, reader)
    redis.call('ZREM', qr, reader)
    redis.call('ZREM', alive, reader)
  end
  expire_with_last_reader(readers, now)
  publish(channel, table.concat(group, '\n'))
elseif redis.call('ZCARD', readers) == 0 then
  if w[1] then
    hand_over(writer, qw, alive, w[1], fence, us, patience, channel)
  else
    publish(channel, '')
  end
end
return held
