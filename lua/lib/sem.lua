-- include: fence wake queue leases
-- lib/sem.lua: a semaphore's permits. `holders` (zset: token -> expiry,
-- server ms) and `data` (hash: `permits` in force, the last `fence`, `w` when
-- a waiter waits (see sem_obtain.lua), and `f:<token>` / `m:<token>`, each
-- holder's fence and metadata).
-- Defines: sem_prune, sem_tidy, sem_take, sem_serve.

-- Drops the holders whose lease ran out by `now` (ms).
local function sem_prune(holders, data, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', now)) do
    redis.call('HDEL', data, 'f:' .. gone, 'm:' .. gone)
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
end

-- Once no permit is held, the data goes too, as a Lock's hold does: only a
-- fence the server clock (`us`) has not passed yet stays, until it has.
-- `fence`: the last fence in `data`. Returns whether no permit is held.
local function sem_tidy(holders, data, us, fence)
  if redis.call('ZCARD', holders) > 0 then
    return false
  end
  redis.call('DEL', data)
  if fence >= us then
    redis.call('HSET', data, 'fence', fence_text(fence))
    redis.call('PEXPIRE', data, math.floor((fence - us) / 1000) + 1)
  end
  return true
end

-- `token` holds a permit for `ms` ms, with the fence after `last` (the last
-- one in `data`, read by the caller), and metadata `meta` (none stored when
-- false); `fields`: more of `data`'s fields to set in the same HSET, or nil;
-- `alone`: no other permit is held (the caller counted none), so the keys
-- live as long as this one lease. Returns the fence.
local function sem_take(holders, data, token, meta, ms, us, last, fields, alone)
  local fence = next_fence(last, us)
  local f = fence_text(fence)
  fields = fields or {}
  for _, field in ipairs({'fence', f, 'f:' .. token, f}) do
    fields[#fields + 1] = field
  end
  if meta then
    fields[#fields + 1], fields[#fields + 2] = 'm:' .. token, meta
  end
  redis.call('HSET', data, unpack(fields))
  local now = math.floor(us / 1000)
  redis.call('ZADD', holders, now + ms, token)
  if alone then
    expire_with_only_lease(holders, ms, data)
  else
    expire_with_last_reader(holders, now, data)
  end
  return fence
end

-- Fair semaphore: hands every free permit to the next live waiters in line,
-- each for its own patience, named on `channel` in one grants message.
-- Returns whether anyone was let in.
local function sem_serve(holders, data, queue, alive, tags, us, channel)
  local rec = redis.call('HMGET', data, 'permits', 'fence')
  local permits, last = tonumber(rec[1]) or 0, tonumber(rec[2]) or 0
  local free = permits - redis.call('ZCARD', holders)
  local lines = {}
  while free > 0 do
    local head, attempt, patience = first_waiter(queue, alive, tags)
    if not head then
      break
    end
    leave_queue(alive, tags, head, queue)
    -- No metadata: the waiter's own, if any, comes with its claim (its next
    -- attempt), so one that gave none reads back none.
    local fence = sem_take(holders, data, head, false, patience, us, last)
    last = fence
    lines[#lines + 1] = grant_line(head, fence, attempt)
    free = free - 1
  end
  if #lines > 0 then
    publish_grants(channel, lines)
    return true
  end
  return false
end
