-- rw_read_refresh.lua: push one reader's own expiry.
-- KEYS: [readers zset (token -> expiry, server ms)]
-- ARGV: [token, ttl_ms]
-- Returns 1 when renewed, 0 when this reader is gone (expired or removed).
local readers, token, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2])
local now = now_ms()
local expiry = tonumber(redis.call('ZSCORE', readers, token))
if not expiry or expiry <= now then
  return 0
end
redis.call('ZADD', readers, now + ttl, token)
expire_with_last_reader(readers, now)
return 1
