-- include: clock
-- sem_inspect.lua: a semaphore's permits and holders.
-- KEYS: [holders (a zset), data (a hash), queue] (as sem_obtain.lua)
-- ARGV: none
-- Returns {permits (0: unknown, nothing held), waiters in the fair queue,
--          {token, meta, fence, pttl} for each live holder, earliest expiry first;
--          meta false (nil) when the holder gave none}.
local holders, data, queue = KEYS[1], KEYS[2], KEYS[3]
local now = now_ms()
local out = {}
local live = redis.call('ZRANGEBYSCORE', holders, '(' .. now, '+inf', 'WITHSCORES')
for i = 1, #live, 2 do
  local token = live[i]
  local rec = redis.call('HMGET', data, 'm:' .. token, 'f:' .. token)
  out[#out + 1] = {token, rec[1] or false, tonumber(rec[2]) or 0, tonumber(live[i + 1]) - now}
end
return {tonumber(redis.call('HGET', data, 'permits')) or 0, redis.call('ZCARD', queue), out}
