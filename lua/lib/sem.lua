-- include: fence leases sem_end
-- lib/sem.lua: a semaphore's permits. `holders` (zset: token -> expiry,
-- server ms) and `data` (hash: `permits` in force, the last `fence`, `w` when
-- a waiter waits (see sem_obtain.lua), and `f:<token>` / `m:<token>`, each
-- holder's fence and metadata). `permits` is in the data exactly while a
-- permit is held: written with the first take, gone with the last release
-- (lib/sem_end.lua), and expiring with the leases (the data's expiry is set with
-- the holders', after it, so never before it).
-- Defines: sem_prune, sem_held, sem_reenter, sem_tidy, sem_take.

-- Drops the holders whose lease ran out by `now` (ms).
local function sem_prune(holders, data, now)
  for _, gone in ipairs(redis.call('ZRANGEBYSCORE', holders, '-inf', now)) do
    redis.call('HDEL', data, 'f:' .. gone, 'm:' .. gone)
  end
  redis.call('ZREMRANGEBYSCORE', holders, '-inf', now)
end

-- What a take asking for `permits` finds at `now` (ms): the permits held,
-- the last fence (0: none), the data's fields the take writes besides its
-- own (`permits`, when another count was in force: the newest applies
-- while none is held), or nil; or, last, the refusal when another count is
-- in force while permits are held (FERROLOCK_PERMITS, src/error/refusal.rs).
-- Without `permits` in the data none is held, and the leases need no
-- counting. Expired leases are pruned only when they could matter: when
-- the permits look all taken, or a different count is asked while some
-- look held.
local function sem_held(holders, data, permits, now)
  local rec = redis.call('HMGET', data, 'permits', 'fence')
  local configured, last = tonumber(rec[1]), tonumber(rec[2]) or 0
  local held = configured and redis.call('ZCARD', holders) or 0
  if held > 0 and (held >= permits or configured ~= permits) then
    sem_prune(holders, data, now)
    held = redis.call('ZCARD', holders)
  end
  if configured == permits then
    return held, last, nil
  end
  if configured and held > 0 then
    return held, last, nil, redis.error_reply('FERROLOCK_PERMITS the semaphore has ' .. configured
      .. ' permits while held, not ' .. permits)
  end
  return held, last, {'permits', permits}
end

-- `token` takes its live permit again (an attempt sent twice, a hand-over
-- claimed, a token adopted): `ms` ms more from `now`, metadata `meta`
-- (kept when false), `fields` (or nil) written too. Returns the taken reply.
local function sem_reenter(holders, data, token, meta, ms, now, fields)
  if fields then
    redis.call('HSET', data, unpack(fields))
  end
  redis.call('ZADD', holders, now + ms, token)
  if meta then
    redis.call('HSET', data, 'm:' .. token, meta)
  end
  expire_with_last_reader(holders, now, data)
  return {1, tonumber(redis.call('HGET', data, 'f:' .. token))}
end

-- Once no permit is held, the data goes too (`sem_end`). Returns whether no
-- permit is held.
local function sem_tidy(holders, data, us, fence)
  if redis.call('ZCARD', holders) > 0 then
    return false
  end
  sem_end(holders, data, us, fence)
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
  local n = #fields
  fields[n + 1], fields[n + 2], fields[n + 3], fields[n + 4] = 'fence', f, 'f:' .. token, f
  if meta then
    fields[n + 5], fields[n + 6] = 'm:' .. token, meta
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
