-- include: clock leases
-- lease_refresh_batch.lua: lease_refresh.lua for several leases at once
-- (the renewals that fall due together on one server, or in one Cluster
-- slot): each member's own expiry is pushed in its set of leases only if
-- it is still there; a lease gone changes nothing, and the others are
-- renewed all the same.
-- KEYS: for each lease in turn, in the order of ARGV: its leases zset, then
--       the keys that live as long as its latest lease (a semaphore's data
--       hash)
-- ARGV: [leases (three items a lease, in order: how many of KEYS are its
--       keys, its token, its ttl in ms)]
-- Returns one answer a lease, in order: 1 renewed, 0 when it is gone
-- (expired or removed).
local leases = ARGV

local now = now_ms()
local answers, first = {}, 1
for i = 1, #leases, 3 do
  local count, token, ttl_ms = tonumber(leases[i]), leases[i + 1], tonumber(leases[i + 2])
  local set = KEYS[first]
  local expiry = tonumber(redis.call('ZSCORE', set, token))
  if not expiry or expiry <= now then
    answers[#answers + 1] = 0
  else
    redis.call('ZADD', set, now + ttl_ms, token)
    expire_with_last_reader(set, now, unpack(KEYS, first + 1, first + count - 1))
    answers[#answers + 1] = 1
  end
  first = first + count
end
return answers
