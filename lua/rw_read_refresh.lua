-- rw_read_refresh.lua: push one reader's own expiry.
-- KEYS: [readers zset (token -> expiry, server ms)]
-- ARGV: [token, ttl_ms]
-- Returns 1 when renewed, 0 when this reader is gone (expired or removed).
local readers, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local expiry = tonumber(redis.call('ZSCORE', readers, token))
if not expiry or expiry <= now then
  return 0
end
redis.call('ZADD', readers, now + ttl, token)
local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
redis.call('PEXPIRE', readers, tonumber(last[2]) - now)
return 1
