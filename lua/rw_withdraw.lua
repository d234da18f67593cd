-- include: wake
-- rw_withdraw.lua: a writer that stopped waiting takes back its intent.
-- KEYS: [writer intent]
-- ARGV: [token, channel]   readers held back by the intent are told on `channel`
-- Returns 1 when the intent was this writer's (and is gone now), else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  publish(ARGV[2], '')
  return 1
end
return 0
