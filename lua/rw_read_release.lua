-- include: clock wake
-- rw_read_release.lua: leave the readers of an RWMutex.
-- KEYS: [readers zset (token -> expiry, server ms), writer hash]
-- ARGV: [token, channel]   the last reader out announces it on `channel`
--       when a writer waits: one marked the writer hash `w` (rw_write.lua),
--       alone in that hash while no writer holds (it goes with the mark)
-- Returns 1 when this reader was still reading, 0 when it had expired or was gone.
local readers, writer, token = KEYS[1], KEYS[2], ARGV[1]
local now = now_ms()
-- Expired readers go first, so removing this one answers whether it was live.
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local live = redis.call('ZREM', readers, token)
-- The mark is used up: whoever the message wakes and still finds the lock
-- taken marks it again in that same attempt.
if redis.call('ZCARD', readers) == 0 and redis.call('HDEL', writer, 'w') == 1 then
  publish(ARGV[2], '')
end
return live
