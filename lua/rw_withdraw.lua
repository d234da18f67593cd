-- include: wake
-- rw_withdraw.lua: a writer that stopped waiting takes back its intent.
-- KEYS: [intent (the writer's)]
-- ARGV: [token, channel (where the readers held back by the intent are told)]
-- Returns 1 when the intent was this writer's (and is gone now), else 0.
local intent = KEYS[1]
local token, channel = ARGV[1], ARGV[2]

if redis.call('GET', intent) == token then
  redis.call('DEL', intent)
  publish(channel, '')
  return 1
end
return 0
