-- common.lua: helpers shared by every script; prepended to each at build time.

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

-- Fair mode: drops the waiters whose liveness ran out by `now` (ms).
local function prune_waiters(queue, alive, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', alive, '-inf', now)) do
    redis.call('ZREM', queue, gone)
  end
  redis.call('ZREMRANGEBYSCORE', alive, '-inf', now)
end

-- RWMutex: the readers key lives as long as its latest reader.
local function expire_with_last_reader(readers, now)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[1] then
    redis.call('PEXPIRE', readers, tonumber(last[2]) - now)
  end
end

