-- include: fence
-- lib/hold.lua: a Lock's hash (fields token, meta, fence; its PEXPIRE is the
-- hold's ttl), also an RWMutex writer's.
-- Defines: holds_all, holder, hold, end_hold.

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
-- adopting a restored hold keeps its owner's). Returns the taken reply.
local function hold(lock, token, meta, ttl, fence)
  redis.call('HSET', lock, 'token', token, 'fence', fence_text(fence))
  if meta then
    redis.call('HSET', lock, 'meta', meta)
  end
  redis.call('PEXPIRE', lock, ttl)
  return {1, fence}
end

-- Ends the hold kept in `key` (fence `fence`) at server time `now` (us): the
-- key goes, unless the clock has not passed the fence yet (same microsecond,
-- or a clock step back): then only the fence stays, until the clock passes it.
local function end_hold(key, fence, now)
  if fence < now then
    redis.call('DEL', key)
  else
    redis.call('HDEL', key, 'token', 'meta')
    redis.call('PEXPIRE', key, math.floor((fence - now) / 1000) + 1)
  end
end
