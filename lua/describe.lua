-- include: clock hold parts
-- describe.lua: everything stored under one name, every kind of primitive
-- alike (for listing and inspecting by an operator; changes nothing). What
-- each key is comes from the key layout table (src/keys/layout.rs), so a
-- kind added there is described without a change here.
-- KEYS: every part of one name, of every kind (channels too: never read)
-- ARGV: [roles (one for each key, '<kind> <role>'; roles: hold, a hash:
--       token, meta, fence; readers / permits, a zset: token -> expiry,
--       server ms; data, a hash: permits, f:<token>, m:<token>; intent,
--       queue / rqueue, fair queues of writers / readers; alive, their
--       liveness; tags, wake, watch)]
-- Returns one entry per kind, in the order of its first key:
--   {kind, holders, queued writers, queued readers, limit, intent pttl,
--    subscribed}
--   holders: {role, token, meta, fence, ms left} each: the hold first, then
--     the live readers and permits, earliest expiry first (meta false, a nil
--     reply, where the holder gave none or the kind keeps none; fence 0 where
--     the kind keeps none);
--   queued: waiters still alive (whose liveness has not run out);
--   limit: the data's `permits` (-1: none stored);
--   intent pttl: a waiting writer's intent (-2: none);
--   subscribed: the connections subscribed to the kind's wake channel (one
--     per process with a waiter; PUBSUB NUMSUB, SHARDNUMSUB on a Cluster),
--     asked only while the kind is held; 0 where the user may not ask.
local roles = ARGV

local kinds, order = parts_by_kind(KEYS, roles)
local now = now_ms()
local NUMSUB = PUBLISH == 'SPUBLISH' and 'SHARDNUMSUB' or 'NUMSUB'

-- Who waits for a non-fair primitive is kept in no key: the subscribers of
-- its wake channel are what Redis can tell. pcall: a user allowed only the
-- primitives' own commands (no PUBSUB) still inspects, seeing 0.
local function subscribed(channel)
  local reply = redis.pcall('PUBSUB', NUMSUB, channel)
  if type(reply) ~= 'table' or reply.err then
    return 0
  end
  return tonumber(reply[2]) or 0
end

local function live(waiting, liveness)
  local n = 0
  if not present(waiting) or not liveness then
    return n
  end
  for _, token in ipairs(redis.call('ZRANGE', waiting, 0, -1)) do
    local until_ms = tonumber(redis.call('ZSCORE', liveness, token))
    if until_ms and until_ms > now then
      n = n + 1
    end
  end
  return n
end

local out = {}
for _, kind in ipairs(order) do
  local k = kinds[kind]
  local holders = {}
  local held = k.hold and holder(k.hold) or {}
  if held[1] then
    holders[1] = {'hold', held[1], held[2], held[3], held[4]}
  end
  for _, role in ipairs({'readers', 'permits'}) do
    local found = present(k[role]) and redis.call('ZRANGEBYSCORE', k[role], '(' .. now, '+inf', 'WITHSCORES') or {}
    for i = 1, #found, 2 do
      local token, rec = found[i], {}
      if k.data then
        rec = redis.call('HMGET', k.data, 'm:' .. token, 'f:' .. token)
      end
      holders[#holders + 1] = {role, token, rec[1] or false, tonumber(rec[2]) or 0, tonumber(found[i + 1]) - now}
    end
  end
  local limit = present(k.data) and tonumber(redis.call('HGET', k.data, 'permits')) or -1
  local intent = k.intent and redis.call('PTTL', k.intent) or -2
  local subscribers = 0
  if #holders > 0 and k.wake then
    subscribers = subscribed(k.wake)
  end
  out[#out + 1] = {kind, holders, live(k.queue, k.alive), live(k.rqueue, k.alive), limit, intent, subscribers}
end
return out
