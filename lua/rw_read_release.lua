-- include: clock wake
-- rw_read_release.lua: leave the readers of an RWMutex.
-- KEYS: [readers zset (token -> expiry, server ms)]
-- ARGV: [token, channel]   the last reader out announces it on `channel`
-- Returns 1 when this reader was still reading, 0 when it had expired or was gone.
local readers, token = KEYS[1], ARGV[1]
local now = now_ms()
local expiry = tonumber(redis.call('ZSCORE', readers, token))
redis.call('ZREM', readers, token)
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
if redis.call('ZCARD', readers) == 0 then
  publish(ARGV[2], '')
end
if expiry and expiry > now then
  return 1
end
return 0
