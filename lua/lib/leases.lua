-- include:
-- lib/leases.lua: a set of leases (zset: token -> expiry, server ms): an
-- RWMutex's readers, a semaphore's permits.
-- Defines: expire_with_last_reader, expire_with_only_lease, expire_with_new_lease.

-- The set `readers` lives as long as its latest lease (`now`: server ms),
-- and so do the keys given after it.
local function expire_with_last_reader(readers, now, ...)
  local last = redis.call('ZRANGE', readers, -1, -1, 'WITHSCORES')
  if last[1] then
    for _, key in ipairs({readers, ...}) do
      redis.call('PEXPIRE', key, tonumber(last[2]) - now)
    end
  end
end

-- The set `readers` holds one lease, `ms` ms more: the set and the keys given
-- after it live as long (what expire_with_last_reader would find, without
-- reading the set).
local function expire_with_only_lease(readers, ms, ...)
  redis.call('PEXPIRE', readers, ms)
  for i = 1, select('#', ...) do
    redis.call('PEXPIRE', (select(i, ...)), ms)
  end
end

-- The set `readers` just got a lease of `ms` ms from now: it lives at least
-- as long. `fresh`: the set did not exist before that lease (so has no
-- expiry yet). Never shortened: another lease may outlive this one.
local function expire_with_new_lease(readers, ms, fresh)
  if fresh or redis.call('PTTL', readers) < ms then
    redis.call('PEXPIRE', readers, ms)
  end
end
