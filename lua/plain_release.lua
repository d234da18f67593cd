-- include: wake
-- plain_release.lua: give up a plain hold (one string key whose value is
-- its owner's token: the layout of redis-py's Lock and python-redis-lock),
-- only if `token` holds it, or whoever holds it when forced. Taken by
-- MULTI / SET key token NX [PX ttl] / GET / PTTL / TIME / EXEC
-- (src/primitive/plain.rs), renewed by plain_refresh.lua.
-- KEYS: [hold, signal (optional: python-redis-lock's list
--       `lock-signal:<name>`, on which its waiters block, BLPOP)]
-- ARGV: [token, force ('1' releases whoever holds: python-redis-lock's
--        reset), channel ('' = none: where ferrolock's own waiters are
--        woken), signal_expire_ms (with a signal key)]
-- Returns 1 when a hold was released, 0 when `token` did not hold it (nothing
-- changed). A release pushes one wake-up on the signal list (its waiters
-- each take one) as python-redis-lock's own release does: the list emptied,
-- one element pushed, expiring after signal_expire_ms.
local hold, signal = KEYS[1], KEYS[2]
local token, force, channel, signal_expire_ms = ARGV[1], ARGV[2] == '1', ARGV[3], ARGV[4]

local holder = redis.call('GET', hold)
if not holder or (not force and holder ~= token) then
  return 0
end
redis.call('DEL', hold)
if signal then
  redis.call('DEL', signal)
  redis.call('LPUSH', signal, 1)
  redis.call('PEXPIRE', signal, signal_expire_ms)
end
if channel ~= '' then
  publish(channel, '')
end
return 1
