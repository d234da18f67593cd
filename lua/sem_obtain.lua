-- include: clock queue sem sem_queue
-- sem_obtain.lua: take one of a semaphore's permits, each its own lease, in
-- fair mode (arrival order); a semaphore without a queue takes with
-- sem_take.lua, the same take without the queue's steps.
-- KEYS: [holders (a zset: token -> expiry, server ms), data (a hash: permits,
--        fence, f:<token>, m:<token>), queue, alive, tags (fair mode, as a
--        fair Lock's)]
-- ARGV: [token, ttl_ms, metadata, set_metadata ('1' or '0'), permits,
--        fair ('1' or '0'), patience_ms, will_wait ('1' or '0'), attempt, channel]
-- Returns {1, fence} when this token holds a permit (taken now, or re-entered:
-- claimed after a hand-over, or adopted), or {0, wait_ms}: until the first
-- holder's lease runs out, or -1 when a permit is free but others are first
-- in line (fair mode: they are let in now). A waiter that will wait marks
-- the data `w`, so that releases wake it (fair: serve the queue); one that
-- waited marks it when it takes a permit, for those still behind it.
-- Refuses with FERROLOCK_PERMITS (src/error/refusal.rs) when permits
-- differs from what the semaphore has while any permit is held (while none
-- is, the newest count applies).
local holders, data, queue, alive, tags = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local token, ttl_ms, metadata, set_metadata = ARGV[1], tonumber(ARGV[2]), ARGV[3], ARGV[4] == '1'
local permits, fair, patience_ms = tonumber(ARGV[5]), ARGV[6] == '1', tonumber(ARGV[7])
local will_wait, attempt, channel = ARGV[8] == '1', ARGV[9], ARGV[10]

local meta = set_metadata and metadata

local us = now_us()
local now = math.floor(us / 1000)
if fair then
  prune_waiters(alive, tags, now, queue)
end

local held, last, fields, refused = sem_held(holders, data, permits, now)
if refused then
  return refused
end

-- Re-entered only when some permit is held: with none, this token holds none.
local expiry = held > 0 and tonumber(redis.call('ZSCORE', holders, token))
if expiry and expiry > now then
  if fair then
    leave_queue(alive, tags, token, queue)
  end
  return sem_reenter(holders, data, token, meta, ttl_ms, now, fields)
end

local free = permits - held
local can = free > 0
if can and fair then
  local rank = redis.call('ZRANK', queue, token)
  can = (rank and rank < free) or (not rank and redis.call('ZCARD', queue) < free)
end
if can then
  if fair then
    leave_queue(alive, tags, token, queue)
  end
  if tonumber(attempt) > 1 then
    -- It waited: others may wait behind it, so its release wakes them.
    fields = fields or {}
    fields[#fields + 1], fields[#fields + 2] = 'w', '1'
  end
  return {1, sem_take(holders, data, token, meta, ttl_ms, us, last, fields, held == 0)}
end

if fields then
  redis.call('HSET', data, unpack(fields))
end
if will_wait and fair then
  enqueue(queue, alive, tags, token, us, patience_ms, attempt)
end
local served = free > 0 and sem_serve(holders, data, queue, alive, tags, us, channel)
if will_wait and (held > 0 or served) then
  -- A release wakes waiters (fair: serves the queue) only when one marked
  -- the data (sem_release.lua); with no permit held there is no data to
  -- mark, unless others in line were just let in.
  redis.call('HSET', data, 'w', '1')
end
if free > 0 then
  return {0, -1}
end
local first = redis.call('ZRANGE', holders, 0, 0, 'WITHSCORES')
return {0, tonumber(first[2]) - now}
