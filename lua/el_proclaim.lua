-- include: wake
-- el_proclaim.lua: the leader of an election changes its published value.
-- KEYS: [the election's term hold (a fair Lock's hash)]
-- ARGV: [token, value, watch channel]
-- Returns 1 when `token` still leads (value set, watchers told ''), else 0.
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'meta', ARGV[2])
publish(ARGV[3], '')
return 1
