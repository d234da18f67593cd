-- include: clock leases
-- lease_refresh.lua: push one member's own expiry in a set of leases (an
-- RWMutex's readers, a semaphore's permits).
-- KEYS: the leases zset (token -> expiry, server ms), then the keys that live
--       as long as its latest lease (a semaphore's data hash)
-- ARGV: [token, ttl_ms]
-- Returns 1 when renewed, 0 when this lease is gone (expired or removed).
local leases = KEYS[1]
local token, ttl_ms = ARGV[1], tonumber(ARGV[2])

local now = now_ms()
local expiry = tonumber(redis.call('ZSCORE', leases, token))
if not expiry or expiry <= now then
  return 0
end
redis.call('ZADD', leases, now + ttl_ms, token)
expire_with_last_reader(leases, now, unpack(KEYS, 2))
return 1
