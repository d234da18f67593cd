-- include: hold
-- refresh_batch.lua: refresh.lua for several holds at once (the renewals
-- that fall due together on one server, or in one Cluster slot): each
-- hold's keys are pushed only if its owner holds them all; a hold
-- no longer its owner's changes nothing, and the others are renewed all
-- the same.
-- KEYS: the keys of every hold (lib/hold.lua), one hold's after another's, in the
--       order of ARGV
-- ARGV: [holds (four items a hold, in order: how many of KEYS are its
--       keys, its token, its ttl in ms, its fence as refresh.lua takes it)]
-- Returns one answer a hold, in order: 1 renewed, 0 when any of its keys
-- is no longer its owner's (nothing of it changed).
local holds = ARGV

-- A hold of one key (every hold but a multi-lock's) is renewed as
-- refresh.lua renews it; a multi-lock's keys are looked at through a table.
local answers, first = {}, 1
for i = 1, #holds, 4 do
  local count, token, ttl_ms = tonumber(holds[i]), holds[i + 1], holds[i + 2]
  local renewed
  if count == 1 then
    renewed = renew_hold(KEYS[first], token, ttl_ms, tonumber(holds[i + 3]))
  else
    local keys = {unpack(KEYS, first, first + count - 1)}
    renewed = holds_all(keys, token)
    if renewed then
      for j = 1, count do
        redis.call('PEXPIRE', keys[j], ttl_ms)
      end
    end
  end
  first = first + count
  answers[#answers + 1] = renewed and 1 or 0
end
return answers
