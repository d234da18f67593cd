-- include: clock wake queue sem
-- sem_release.lua: give a semaphore's permit back; also how a fair waiter
-- leaves the queue.
-- KEYS: [holders zset, data hash, queue, liveness, tags] (as sem_obtain.lua)
-- ARGV: [token, channel, release ('1': give this token's permit back too;
--        '0': only leave the queue, as a cancelled adopt does)]
-- Returns 1 when this token held a live permit (given back now), else 0.
-- Free permits go to the next waiters in line at once (fair mode), named on
-- `channel`; otherwise a given-back permit is announced with ''.
local holders, data, queue, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, channel = ARGV[1], ARGV[2]

leave_queue(alive, tags, token, queue)
local us = now_us()
local now = math.floor(us / 1000)
local held = 0
if ARGV[3] == '1' then
  local expiry = tonumber(redis.call('ZSCORE', holders, token))
  if expiry then
    redis.call('ZREM', holders, token)
    redis.call('HDEL', data, 'f:' .. token, 'm:' .. token)
    if expiry > now then
      held = 1
    end
  end
end
sem_prune(holders, data, now)
prune_waiters(alive, tags, now, queue)
if not sem_serve(holders, data, queue, alive, tags, us, channel) and held == 1 then
  publish(channel, '')
end
sem_tidy(holders, data, us)
return held
