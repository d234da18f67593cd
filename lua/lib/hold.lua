-- include: fence
-- lib/hold.lua: a Lock's hash (fields token, meta, fence, w when a waiter
-- waits for it, a when its fence is ahead of the server's clock; its PEXPIRE
-- is the hold's ttl), also an RWMutex writer's.
-- Defines: holds_all, holder, hold, waited_on, end_hold.

-- Whether `token` holds every lock hash in `keys`.
local function holds_all(keys, token)
  for _, key in ipairs(keys) do
    if redis.call('HGET', key, 'token') ~= token then
      return false
    end
  end
  return true
end

-- Who holds `lock`: {token, meta, fence, pttl}, or {} when nobody does; meta
-- is false (a nil reply) when the holder gave none, '' when it gave ''.
local function holder(lock)
  local rec = redis.call('HMGET', lock, 'token', 'meta', 'fence')
  if not rec[1] then
    return {}
  end
  return {rec[1], rec[2] or false, tonumber(rec[3]) or 0, redis.call('PTTL', lock)}
end

-- `token` holds `lock` with fence `fence` for `ttl` ms. Its metadata is set
-- to `meta`, or kept when `meta` is false (re-entry without new metadata:
-- adopting a restored hold keeps its owner's). `waited`: the new holder
-- waited for it, so others may wait still: the hold is marked waited on
-- (field `w`), and its release wakes them (see `waited_on`). `ahead`: the
-- fence is above the server's clock (it came from the last fence + 1, not
-- from TIME): marked (field `a`), so its release reads the clock to keep the
-- fence until the clock passes it (`end_hold`); a hold without the mark has
-- a fence the clock gave, which the release deletes without reading TIME.
-- One HSET, one PEXPIRE. Returns the taken reply.
local function hold(lock, token, meta, ttl, fence, waited, ahead)
  local fields = {'token', token, 'fence', fence_text(fence)}
  if meta then
    fields[#fields + 1], fields[#fields + 2] = 'meta', meta
  end
  if waited then
    fields[#fields + 1], fields[#fields + 2] = 'w', '1'
  end
  if ahead then
    fields[#fields + 1], fields[#fields + 2] = 'a', '1'
  end
  redis.call('HSET', lock, unpack(fields))
  redis.call('PEXPIRE', lock, ttl)
  return {1, fence}
end

-- A waiter found `lock` held and will wait: the hold is marked waited on, so
-- its release publishes a wake-up. A release with no such mark publishes
-- nothing: nobody waits for it (a waiter subscribes before the attempt that
-- marks, and one woken that takes the lock marks its own hold, for those
-- still waiting behind it).
local function waited_on(lock)
  redis.call('HSET', lock, 'w', '1')
end

-- Ends the hold kept in `key` (fence `fence`) at server time `now` (us): the
-- key goes, unless the clock has not passed the fence yet (same microsecond,
-- or a clock step back): then only the fence stays, until the clock passes it.
-- `now` nil: the clock was not read, for a hold not marked ahead of it (no
-- field `a`, see `hold`), whose fence is a TIME it has passed: the key goes.
local function end_hold(key, fence, now)
  if not now or fence < now then
    redis.call('DEL', key)
  else
    redis.call('HDEL', key, 'token', 'meta', 'w', 'a')
    redis.call('PEXPIRE', key, math.floor((fence - now) / 1000) + 1)
  end
end
