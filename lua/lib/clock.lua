-- include:
-- lib/clock.lua: the Redis server's clock (TIME), never a client's.
-- Defines: now_us, now_ms.

-- The server's clock, in microseconds and in milliseconds.
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function now_ms()
  return math.floor(now_us() / 1000)
end
