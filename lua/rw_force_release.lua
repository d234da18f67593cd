-- rw_force_release.lua: end every hold of an RWMutex, whoever holds it
-- (an operator's recovery, as release.lua's force for a Lock); waiters keep
-- their places in the fair queues and are woken.
-- KEYS: [writer hash, readers zset (token -> expiry, server ms), writer intent]
-- ARGV: [channel]
-- Returns {1 if a writer held else 0, live readers removed}.
local writer, readers, intent = KEYS[1], KEYS[2], KEYS[3]
local us = now_us()
local wrote = redis.call('HEXISTS', writer, 'token')
if wrote == 1 then
  end_hold(writer, tonumber(redis.call('HGET', writer, 'fence')) or 0, us)
end
local read = redis.call('ZCOUNT', readers, '(' .. math.floor(us / 1000), '+inf')
redis.call('DEL', readers, intent)
if wrote == 1 or read > 0 then
  publish(ARGV[1], '')
end
return {wrote, read}
