-- include: clock hold wake
-- rw_read_release.lua: leave the readers of an RWMutex, and wake a waiting
-- writer when the last live reader is out. A reader's release is a
-- transaction (`leave_readers` in src/primitive/rw.rs) that runs this only
-- when it saw a waiting writer's mark: the reader is gone by then, and its
-- ZREM here finds nothing.
-- KEYS: [readers (a zset: token -> expiry, server ms), writer (its hold, lib/hold.lua)]
-- ARGV: [token, channel (the last reader out announces it there when a
--       writer waits: one marked the writer's key `w`, rw_write.lua, alone
--       in that key while no writer holds, and it goes with the mark; a
--       holding writer's mark is left to its release)]
-- Returns 1 when this reader was still reading, 0 when it had expired or was gone.
local readers, writer = KEYS[1], KEYS[2]
local token, channel = ARGV[1], ARGV[2]
local now = now_ms()
-- Expired readers go first, so removing this one answers whether it was live.
redis.call('ZREMRANGEBYSCORE', readers, '-inf', now)
local live = redis.call('ZREM', readers, token)
-- The mark is a waiting writer's only while no writer holds: then it is
-- used up (whoever the message wakes and still finds the lock taken marks
-- it again in that same attempt). A holding writer's mark is its own
-- waiters', for its release: a reader whose lease ran out before that
-- writer took over, released late, leaves it and wakes nobody.
if redis.call('ZCARD', readers) == 0 then
  local owner, fence, flags = read_hold(writer)
  if not owner and flagged(flags, 'w') then
    if fence > 0 then
      redis.call('SET', writer, hold_value('', fence, string.gsub(flags, 'w', ''), false), 'KEEPTTL')
    else
      redis.call('DEL', writer)
    end
    publish(channel, '')
  end
end
return live
