-- include: clock fence records hold
-- obtain.lua: take every lock in KEYS for one owner, or none of them.
-- KEYS: lock hashes, one per name (fields: token, meta, fence); on a quorum's
--       master, then as many fence records, one per hash (see recorded_fence)
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0'),
--        records ('1' when KEYS carries the fence records; absent on one server)]
-- Returns {1, fence} when the owner now holds every key (taken now, or already
-- its own: the hold is re-entered, its fence kept, and its metadata too unless
-- set_metadata is '1'), or {0, pttl} with the longest remaining hold among the
-- other owners.
local token, ttl, meta = ARGV[1], ARGV[2], ARGV[4] == '1' and ARGV[3]
local locks, records = KEYS, {}
if ARGV[5] == '1' then
  locks, records = split_records(KEYS)
end

local busy, mine, last = nil, 0, 0
for i, key in ipairs(locks) do
  local rec = redis.call('HMGET', key, 'token', 'fence')
  if rec[1] and rec[1] ~= token then
    busy = math.max(busy or -1, redis.call('PTTL', key))
  elseif rec[1] then
    mine = mine + 1
  end
  last = math.max(last, tonumber(rec[2]) or 0, recorded_fence(records[i]))
end
if busy then
  return {0, busy}
end

if mine == #locks then
  for _, key in ipairs(locks) do
    hold(key, token, meta, ttl, tonumber(redis.call('HGET', key, 'fence')) or last)
  end
  return {1, last}
end

-- The fence: server time in microseconds, and above every fence still on record.
local us = now_us()
local fence = next_fence(last, us)
for i, key in ipairs(locks) do
  hold(key, token, meta, ttl, fence)
  remember_fence(records[i], fence, us)
end
return {1, fence}
