-- include: clock hold wake sem parts
-- force_release.lua: an operator's recovery: end the holds of one name,
-- every kind of primitive alike, whoever holds them; or only the hold of
-- one token (compare-and-delete: a hold taken since by another token is
-- never removed). What each key is comes from the key layout table
-- (src/keys/layout.rs), as for describe.lua. Waiters keep their places in
-- the fair queues and are woken on the kind's wake channel (one message a
-- hold removed: each is a release; fair waiters take what is free at their
-- next attempt), and the kind's watchers (an election's) are told ''.
-- KEYS: every part of one name, of every kind (channels too)
-- ARGV: [roles (one for each key, '<kind> <role>', as describe.lua), token
--       (whose hold goes; '' = every hold, and a waiting writer's intent)]
-- Returns one entry per kind, in the order of its first key:
--   {kind, holds removed (a hold, live readers and permits)}.
local roles, token = ARGV, ARGV[#KEYS + 1] or ''

local kinds, order = parts_by_kind(KEYS, roles)
local us = now_us()
local now = math.floor(us / 1000)

-- Drops `who` from the leases zset `leases`, and its record from `data`.
local function drop(leases, data, who)
  redis.call('ZREM', leases, who)
  if data then
    redis.call('HDEL', data, 'f:' .. who, 'm:' .. who)
  end
end

local out = {}
for _, kind in ipairs(order) do
  local k = kinds[kind]
  local removed = 0
  if k.hold then
    local owner, fence = read_hold(k.hold)
    if owner and (token == '' or owner == token) then
      end_hold(k.hold, fence, us)
      removed = 1
    end
  end
  for _, role in ipairs({'readers', 'permits'}) do
    local leases = k[role]
    if not present(leases) then
      leases = nil
    end
    if leases and token == '' then
      removed = removed + redis.call('ZCOUNT', leases, '(' .. now, '+inf')
      for _, who in ipairs(redis.call('ZRANGE', leases, 0, -1)) do
        drop(leases, k.data, who)
      end
    elseif leases and (tonumber(redis.call('ZSCORE', leases, token)) or 0) > now then
      drop(leases, k.data, token)
      removed = removed + 1
    end
    if leases and k.data then
      sem_tidy(leases, k.data, us, tonumber(redis.call('HGET', k.data, 'fence')) or 0)
    end
  end
  if token == '' and k.intent then
    redis.call('DEL', k.intent)
  end
  if removed > 0 then
    for _ = 1, math.min(removed, 100) do
      publish(k.wake, '')
    end
    if k.watch then
      publish(k.watch, '')
    end
  end
  out[#out + 1] = {kind, removed}
end
return out
