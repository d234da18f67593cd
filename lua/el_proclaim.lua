-- include: hold wake
-- el_proclaim.lua: the leader of an election changes its published value.
-- KEYS: [lock (the election's term hold, a fair Lock's hold, lib/hold.lua)]
-- ARGV: [token, value, announce (the channel its watchers listen on)]
-- Returns 1 when `token` still leads (value set, watchers told ''), else 0.
local lock = KEYS[1]
local token, value, announce = ARGV[1], ARGV[2], ARGV[3]

local owner, fence, flags = read_hold(lock)
if owner ~= token then
  return 0
end
redis.call('SET', lock, hold_value(owner, fence, flags, value), 'KEEPTTL')
publish(announce, '')
return 1
