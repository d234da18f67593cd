-- obtain.lua: take every lock in KEYS for one owner, or none of them.
-- KEYS: lock hashes, one per name (fields: token, meta, fence)
-- ARGV: [token, ttl_ms, metadata]
-- Returns {1, fence} when the owner now holds every key (taken now, or already
-- its own: the hold is re-entered and its fence kept), or {0, pttl} with the
-- longest remaining hold among the other owners.
local token, ttl, meta = ARGV[1], ARGV[2], ARGV[3]

local busy, mine, last = -1, 0, 0
for _, key in ipairs(KEYS) do
  local rec = redis.call('HMGET', key, 'token', 'fence')
  if rec[1] and rec[1] ~= token then
    busy = math.max(busy, redis.call('PTTL', key))
  elseif rec[1] then
    mine = mine + 1
  end
  last = math.max(last, tonumber(rec[2]) or 0)
end
if busy ~= -1 then
  return {0, busy}
end

for _, key in ipairs(KEYS) do
  redis.call('PEXPIRE', key, ttl)
end
if mine == #KEYS then
  return {1, last}
end

-- The fence: server time in microseconds, and above every fence still on record.
local fence = math.max(now_us(), last + 1)
local f = string.format('%.0f', fence)
for _, key in ipairs(KEYS) do
  redis.call('HSET', key, 'token', token, 'meta', meta, 'fence', f)
  redis.call('PEXPIRE', key, ttl)
end
return {1, fence}
