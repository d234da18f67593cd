-- include: fence
-- lib/sem_end.lua: the end of a semaphore's last permit (lib/sem.lua's
-- keys), apart so that a release that needs nothing else defines nothing
-- else.
-- Defines: sem_end.

-- The last permit is gone: the holders and the data go, as a Lock's hold
-- does, but for a fence the server clock (`us`) has not passed yet, which
-- stays until it has. `fence`: the last fence in `data`.
local function sem_end(holders, data, us, fence)
  redis.call('DEL', holders, data)
  if fence >= us then
    redis.call('HSET', data, 'fence', fence_text(fence))
    redis.call('PEXPIRE', data, math.floor((fence - us) / 1000) + 1)
  end
end
