-- include: clock wake queue sem sem_queue
-- sem_release.lua: give a semaphore's permit back; also how a fair waiter
-- leaves the queue.
-- KEYS: [holders, data, queue, alive, tags] (as sem_obtain.lua)
-- ARGV: [token, channel, release ('1': give this token's permit back too;
--        '0': only leave the queue, as a cancelled adopt does)]
-- Returns 1 when this token held a live permit (given back now), else 0.
-- Free permits go to the next waiters in line at once (fair mode), named on
-- `channel`; otherwise a given-back permit is announced with ''.
local holders, data, queue, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, channel, release = ARGV[1], ARGV[2], ARGV[3] == '1'

-- With no queue (not fair, or nobody queued) there is nothing to leave,
-- prune or serve; a release is announced only when someone waits: a queue,
-- or a waiter's mark `w` in the data (sem_obtain.lua).
local queued = redis.call('EXISTS', queue) == 1
if queued then
  leave_queue(alive, tags, token, queue)
end
local us = now_us()
local now = math.floor(us / 1000)
local rec = redis.call('HMGET', data, 'fence', 'w')
local held, expiry = 0, nil
if release then
  expiry = tonumber(redis.call('ZSCORE', holders, token))
  if expiry then
    redis.call('ZREM', holders, token)
    if expiry > now then
      held = 1
    end
  end
end
local fence = tonumber(rec[1]) or 0
if not queued then
  if not sem_tidy(holders, data, us, fence) and expiry then
    redis.call('HDEL', data, 'f:' .. token, 'm:' .. token)
  end
  if held == 1 and rec[2] then
    publish(channel, '')
  end
  return held
end
if expiry then
  redis.call('HDEL', data, 'f:' .. token, 'm:' .. token)
end
sem_prune(holders, data, now)
prune_waiters(alive, tags, now, queue)
if not sem_serve(holders, data, queue, alive, tags, us, channel) and held == 1 then
  publish(channel, '')
end
sem_tidy(holders, data, us, fence)
return held
