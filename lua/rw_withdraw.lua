-- rw_withdraw.lua: a writer that stopped waiting takes back its intent.
-- KEYS: [writer intent]
-- ARGV: [token]
-- Returns 1 when the intent was this writer's (and is gone now), else 0.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
