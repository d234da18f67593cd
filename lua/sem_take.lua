-- include: clock sem
-- sem_take.lua: take one of a semaphore's permits, each its own lease: the
-- take of a semaphore without a queue (not fair), sem_obtain.lua's without
-- the queue's steps.
-- KEYS: [holders (a zset: token -> expiry, server ms), data (a hash: permits,
--        fence, w, f:<token>, m:<token>)] (as sem_obtain.lua)
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0'), permits,
--        will_wait ('1': a busy answer marks the data `w`, so that releases
--        wake this waiter), waited ('1': an attempt after the first: a
--        permit taken now is marked `w`, for those still behind it)]
-- Returns {1, fence} when this token holds a permit (taken now, or
-- re-entered: adopted, or an attempt sent twice), or {0, wait_ms}: until
-- the first holder's lease runs out. Refuses with FERROLOCK_PERMITS as
-- sem_obtain.lua does.
local holders, data = KEYS[1], KEYS[2]
local token, ttl_ms, metadata, set_metadata = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local permits, will_wait, waited = ARGV[5], ARGV[6] == '1', ARGV[7] == '1'

-- No data: no permit is held and no fence is kept past one (lib/sem.lua:
-- the data outlives the holders' leases), so a first attempt takes a
-- permit with the clock's fence and the keys live as long as its lease
-- (lib/sem.lua's sem_take and lib/leases.lua's expire_with_only_lease,
-- written out here: this runs before the libraries are built). The fence
-- is the clock's two parts joined as text, as obtain.lua's.
if not waited and redis.call('EXISTS', data) == 0 then
  local time = redis.call('TIME')
  local fence = time[1] .. string.sub('00000' .. time[2], -6)
  if set_metadata then
    redis.call('HSET', data, 'permits', permits, 'fence', fence, 'f:' .. token, fence, 'm:' .. token, metadata)
  else
    redis.call('HSET', data, 'permits', permits, 'fence', fence, 'f:' .. token, fence)
  end
  local expiry = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) + ttl_ms
  redis.call('ZADD', holders, string.format('%d', expiry), token)
  redis.call('PEXPIRE', holders, ttl_ms)
  redis.call('PEXPIRE', data, ttl_ms)
  return {1, fence}
end
-- libraries here

ttl_ms, permits = tonumber(ttl_ms), tonumber(permits)
local meta = set_metadata and metadata

local us = now_us()
local now = math.floor(us / 1000)
local held, last, fields, refused = sem_held(holders, data, permits, now)
if refused then
  return refused
end

if held > 0 then
  local expiry = tonumber(redis.call('ZSCORE', holders, token))
  if expiry and expiry > now then
    return sem_reenter(holders, data, token, meta, ttl_ms, now, fields)
  end
end

if held < permits then
  if waited then
    fields = fields or {}
    fields[#fields + 1], fields[#fields + 2] = 'w', '1'
  end
  return {1, sem_take(holders, data, token, meta, ttl_ms, us, last, fields, held == 0)}
end

if will_wait then
  -- A release wakes waiters only when one marked the data (sem_give.lua).
  redis.call('HSET', data, 'w', '1')
end
local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
