-- common.lua: helpers shared by every script; prepended to each at build time,
-- after one line that sets PUBLISH: 'PUBLISH' on a single node, 'SPUBLISH'
-- (sharded pub/sub, Redis 7) in a Cluster.

-- Announces a release on `channel` (under the keys' hash tag, so in their slot).
local function publish(channel, message)
  redis.call(PUBLISH, channel, message)
end

-- The Redis server's clock, in microseconds and in milliseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end

-- Ends the hold kept in `key` (fence `fence`) at server time `now` (us): the
-- key goes, unless the clock has not passed the fence yet (same microsecond,
-- or a clock step back): then only the fence stays, until the clock passes it.
local function end_hold(key, fence, now)
  if fence < now then
    redis.call('DEL', key)
  else
    redis.call('HDEL', key, 'token', 'meta')
    redis.call('PEXPIRE', key, math.floor((fence - now) / 1000) + 1)
  end
end

-- Fair mode: drops the waiters whose liveness ran out by `now` (ms) from
-- `alive` and from each of the queues given after it.
local function prune_waiters(alive, now, ...)
  local queues = {...}
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
    for _, queue in ipairs(queues) do
      redis.call('ZREM', queue, gone)
    end
  end
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
end

-- Fair mode: a waiter joins `queue` at server time `us` (once) and counts as
-- alive for `patience` ms more. The keys live as long as their longest-lived
-- waiter: a waiter with less patience never shortens another's stay.
local function enqueue(queue, alive, token, us, patience)
  if not redis.call('ZSCORE', queue, token) then
    redis.call('ZADD', queue, us, token)
  end
  redis.call('ZADD', alive, math.floor(us / 1000) + patience, token)
  for _, key in ipairs({queue, alive}) do
    if redis.call('PTTL', key) < patience then
      redis.call('PEXPIRE', key, patience)
    end
  end
end

-- Fair mode: `token` holds `lock` from now on (it took or claimed it) with
-- fence `fence`, for `ttl` ms, and leaves the queue. Returns the taken reply.
local function fair_hold(lock, queue, alive, token, meta, ttl, fence)
  redis.call('HSET', lock, 'token', token, 'meta', meta, 'fence', string.format('%.0f', fence))
  redis.call('PEXPIRE', lock, ttl)
  redis.call('ZREM', queue, token)
  redis.call('ZREM', alive, token)
  return {1, fence}
end

-- Fair mode: a release hands `lock` (last fence `last`) to the waiter `token`
-- at server time `us` (us): it holds for `patience` ms unless it renews, leaves
-- `queue`, and is told on `channel` as '<token> <fence>'.
local function hand_over(lock, queue, alive, token, last, us, patience, channel)
  local fence = string.format('%.0f', math.max(us, last + 1))
  redis.call('HSET', lock, 'token', token, 'meta', '', 'fence', fence)
  redis.call('PEXPIRE', lock, patience)
  redis.call('ZREM', queue, token)
  redis.call('ZREM', alive, token)
  publish(channel, token .. ' ' .. fence)
end

-- RWMutex: the readers key lives as long as its latest reader.
local function expire_with_last_reader(readers, now)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[1] then
    redis.call('PEXPIRE', readers, tonumber(last[2]) - now)
  end
end

