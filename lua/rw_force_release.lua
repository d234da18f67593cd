-- include: clock hold wake
-- rw_force_release.lua: end every hold of an RWMutex, whoever holds it
-- (an operator's recovery, as release.lua's force for a Lock), or only the
-- hold of one token (compare-and-delete: the writer's hold or the reader's
-- lease that token names, if still live); waiters keep their places in the
-- fair queues and are woken.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms), intent (a waiting writer's)]
-- ARGV: [channel, token ('' = every hold, and a waiting writer's intent)]
-- Returns {1 if a writer's hold was ended else 0, live readers removed}.
local writer, readers, intent = KEYS[1], KEYS[2], KEYS[3]
local channel, token = ARGV[1], ARGV[2] or ''
local us = now_us()
local now = math.floor(us / 1000)
local held_by, fence = read_hold(writer)
local wrote = 0
if held_by and (token == '' or held_by == token) then
  end_hold(writer, fence, us)
  wrote = 1
end
local read = 0
if token == '' then
  read = redis.call('ZCOUNT', readers, '(' .. now, '+inf')
  redis.call('DEL', readers, intent)
elseif (tonumber(redis.call('ZSCORE', readers, token)) or 0) > now then
  redis.call('ZREM', readers, token)
  read = 1
end
if wrote == 1 or read > 0 then
  publish(channel, '')
end
return {wrote, read}
