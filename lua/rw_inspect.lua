-- include: clock hold
-- rw_inspect.lua: the state of an RWMutex, and of one reader.
-- KEYS: [writer (its hold, lib/hold.lua), readers (a zset: token -> expiry, server ms), intent (a waiting writer's)]
-- ARGV: [reader (the token of a reader to look up, or '')]
-- Returns {live readers, this reader's ms left (-2: not reading), intent pttl (-2: none),
--          1 if a writer holds else 0}.
local writer, readers, intent = KEYS[1], KEYS[2], KEYS[3]
local reader = ARGV[1]

local now = now_ms()
local count = redis.call('ZCOUNT', readers, '(' .. now, '+inf')
local mine = tonumber(redis.call('ZSCORE', readers, reader))
local left = -2
if mine and mine > now then
  left = mine - now
end
return {count, left, redis.call('PTTL', intent), read_hold(writer) and 1 or 0}
