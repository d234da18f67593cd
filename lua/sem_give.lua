-- include: sem_end
-- sem_give.lua: give a semaphore's permit back while nobody waits: what
-- every release tries first.
-- KEYS: [holders, data] (as sem_obtain.lua)
-- ARGV: [token]
-- Returns 1 when this token held a live permit (given back now), 0 when it
-- held none, or -1, changing nothing, when the data is marked `w`: someone
-- waits (a waiter's mark, a fair waiter's too, see sem_obtain.lua), so the
-- release is sem_release.lua's, which wakes or serves the waiters.
local holders, data = KEYS[1], KEYS[2]
local token = ARGV[1]

local rec = redis.call('HMGET', data, 'fence', 'w')
if rec[2] then
  return -1
end
local time = redis.call('TIME')
local us = tonumber(time[1]) * 1000000 + tonumber(time[2])
local now = math.floor(us / 1000)
-- The first two leases say whether this one is the only one: then both
-- keys go at once, and no lease needs counting.
local first = redis.call('ZRANGE', holders, 0, 1, 'WITHSCORES')
local last = not first[1] or (first[1] == token and not first[3])
-- The last permit, its fence one the clock has passed: both keys go, no
-- helper built (lib/sem_end.lua's sem_end, written out here).
if last and (tonumber(rec[1]) or 0) < us then
  redis.call('DEL', holders, data)
  return first[1] and tonumber(first[2]) > now and 1 or 0
end
-- libraries here

if last then
  -- None left but this one, or none at all: no permit is held now.
  sem_end(holders, data, us, tonumber(rec[1]) or 0)
  return first[1] and tonumber(first[2]) > now and 1 or 0
end
local expiry = tonumber(first[1] == token and first[2] or first[3] == token and first[4]
  or redis.call('ZSCORE', holders, token))
if not expiry then
  return 0
end
-- Another lease is left (one of the first two), so the data stays.
redis.call('ZREM', holders, token)
redis.call('HDEL', data, 'f:' .. token, 'm:' .. token)
return expiry > now and 1 or 0
